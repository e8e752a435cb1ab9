-- What the markdown mirror last saw of each file, so that an unchanged file
-- is recognised by a stat and not parsed again.
CREATE TABLE mirror_files (
	project   TEXT    NOT NULL,
	stem      TEXT    NOT NULL,
	size      INTEGER NOT NULL,
	mtime     INTEGER NOT NULL,
	hash      TEXT    NOT NULL,
	record_id TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (project, stem)
);
