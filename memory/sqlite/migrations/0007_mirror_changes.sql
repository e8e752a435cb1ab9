-- Each mirror_files row carries the mirror version of its last change, and a
-- stem that leaves mirror_files leaves its version in mirror_gone, so that a
-- process holding the state at one version reads only what moved since.
-- Rows from before this migration carry 0: a process reads them with the
-- whole state, which it always does first. The triggers delete before they
-- insert rather than use OR REPLACE: an outer statement's conflict clause
-- would override theirs.
ALTER TABLE mirror_files ADD COLUMN v INTEGER NOT NULL DEFAULT 0;
CREATE INDEX mirror_files_v ON mirror_files (project, v);

CREATE TABLE mirror_gone (
	project TEXT    NOT NULL,
	stem    TEXT    NOT NULL,
	v       INTEGER NOT NULL,
	PRIMARY KEY (project, stem)
);
CREATE INDEX mirror_gone_v ON mirror_gone (project, v);

DROP TRIGGER mirror_files_insert;
DROP TRIGGER mirror_files_update;
DROP TRIGGER mirror_files_delete;

CREATE TRIGGER mirror_files_insert AFTER INSERT ON mirror_files BEGIN
	INSERT INTO mirror_versions (project, version)
		SELECT NEW.project, 0 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = NEW.project);
	UPDATE mirror_versions SET version = version + 1 WHERE project = NEW.project;
	UPDATE mirror_files SET v = (SELECT version FROM mirror_versions WHERE project = NEW.project) WHERE rowid = NEW.rowid;
	DELETE FROM mirror_gone WHERE project = NEW.project AND stem = NEW.stem;
END;

-- Not fired by the trigger's own update of v.
CREATE TRIGGER mirror_files_update AFTER UPDATE OF project, stem, size, mtime, hash, record_id ON mirror_files BEGIN
	INSERT INTO mirror_versions (project, version)
		SELECT NEW.project, 0 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = NEW.project);
	UPDATE mirror_versions SET version = version + 1 WHERE project IN (NEW.project, OLD.project);
	UPDATE mirror_files SET v = (SELECT version FROM mirror_versions WHERE project = NEW.project) WHERE rowid = NEW.rowid;
	DELETE FROM mirror_gone WHERE project = NEW.project AND stem = NEW.stem;
	DELETE FROM mirror_gone WHERE project = OLD.project AND stem = OLD.stem
		AND (OLD.project <> NEW.project OR OLD.stem <> NEW.stem);
	INSERT INTO mirror_gone (project, stem, v)
		SELECT OLD.project, OLD.stem, version FROM mirror_versions
		WHERE project = OLD.project AND (OLD.project <> NEW.project OR OLD.stem <> NEW.stem);
END;

CREATE TRIGGER mirror_files_delete AFTER DELETE ON mirror_files BEGIN
	INSERT INTO mirror_versions (project, version)
		SELECT OLD.project, 0 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = OLD.project);
	UPDATE mirror_versions SET version = version + 1 WHERE project = OLD.project;
	DELETE FROM mirror_gone WHERE project = OLD.project AND stem = OLD.stem;
	INSERT INTO mirror_gone (project, stem, v)
		SELECT OLD.project, OLD.stem, version FROM mirror_versions WHERE project = OLD.project;
END;
