-- A counter per project that moves whenever mirror_files does, so that a
-- process can keep the mirror state in memory and know, with one cheap read,
-- whether any process has changed it since. The triggers insert with
-- NOT EXISTS rather than OR IGNORE: an outer statement's conflict clause
-- would override theirs.
CREATE TABLE mirror_versions (
	project TEXT PRIMARY KEY,
	version INTEGER NOT NULL
);

CREATE TRIGGER mirror_files_insert AFTER INSERT ON mirror_files BEGIN
	INSERT INTO mirror_versions (project, version)
		SELECT NEW.project, 0 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = NEW.project);
	UPDATE mirror_versions SET version = version + 1 WHERE project = NEW.project;
END;

CREATE TRIGGER mirror_files_update AFTER UPDATE ON mirror_files BEGIN
	INSERT INTO mirror_versions (project, version)
		SELECT NEW.project, 0 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = NEW.project);
	UPDATE mirror_versions SET version = version + 1 WHERE project IN (NEW.project, OLD.project);
END;

CREATE TRIGGER mirror_files_delete AFTER DELETE ON mirror_files BEGIN
	INSERT INTO mirror_versions (project, version)
		SELECT OLD.project, 0 WHERE NOT EXISTS (SELECT 1 FROM mirror_versions WHERE project = OLD.project);
	UPDATE mirror_versions SET version = version + 1 WHERE project = OLD.project;
END;
