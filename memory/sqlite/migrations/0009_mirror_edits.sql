-- What the mirror needs to never overwrite a human's edit:
-- ctime catches an edit that put the old size and mtime back (cp -p, rsync
-- -a, tar), which no tool can do to the change time; file_id is the id line
-- the file carries when it is not the record's own id (a second checkout of
-- the repository, whose records need ids of their own), so that writes keep
-- it and pull requests never churn it.
ALTER TABLE mirror_files ADD COLUMN ctime INTEGER NOT NULL DEFAULT 0;
ALTER TABLE mirror_files ADD COLUMN file_id TEXT NOT NULL DEFAULT '';

-- The volatile fields of a record whose file was removed, so that the same
-- file coming back (an editor saving by remove and create, a branch switch)
-- brings back the record it was, not a new one.
CREATE TABLE mirror_forgotten (
	project          TEXT    NOT NULL,
	id               TEXT    NOT NULL,
	file_id          TEXT    NOT NULL,
	use_count        INTEGER NOT NULL,
	last_accessed_at INTEGER,
	expires_at       INTEGER,
	forgotten_at     INTEGER NOT NULL,
	PRIMARY KEY (project, id)
);

DROP TRIGGER mirror_files_update;

-- As in 0007, with the new columns: not fired by the trigger's own update of v.
CREATE TRIGGER mirror_files_update AFTER UPDATE OF project, stem, size, mtime, hash, record_id, ctime, file_id ON mirror_files BEGIN
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
