-- A change sequence for the search index each process keeps in memory:
-- every insert, delete and change of a searched column leaves the record's
-- partition and rowid here under a new, larger seq, one row per record, so
-- an index catches up by reading the rows past the last seq it applied.
-- Use counts and last-access times do not move it.
CREATE TABLE changes (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	project TEXT    NOT NULL,
	rid     INTEGER NOT NULL
);
CREATE UNIQUE INDEX changes_record ON changes (project, rid);
CREATE INDEX changes_seq ON changes (project, seq);

INSERT INTO changes (project, rid) SELECT project, rowid FROM records ORDER BY rowid;

CREATE TRIGGER records_insert_seq AFTER INSERT ON records BEGIN
	DELETE FROM changes WHERE project = new.project AND rid = new.rowid;
	INSERT INTO changes (project, rid) VALUES (new.project, new.rowid);
END;

CREATE TRIGGER records_delete_seq AFTER DELETE ON records BEGIN
	DELETE FROM changes WHERE project = old.project AND rid = old.rowid;
	INSERT INTO changes (project, rid) VALUES (old.project, old.rowid);
END;

CREATE TRIGGER records_update_seq AFTER UPDATE ON records
WHEN old.rowid IS NOT new.rowid OR old.project IS NOT new.project OR old.scope IS NOT new.scope
	OR old.type IS NOT new.type OR old.key IS NOT new.key OR old.description IS NOT new.description
	OR old.body IS NOT new.body OR old.tags IS NOT new.tags OR old.expires_at IS NOT new.expires_at
	OR old.updated_at IS NOT new.updated_at
BEGIN
	DELETE FROM changes WHERE project = old.project AND rid = old.rowid;
	INSERT INTO changes (project, rid) VALUES (old.project, old.rowid);
	DELETE FROM changes WHERE project = new.project AND rid = new.rowid;
	INSERT INTO changes (project, rid) VALUES (new.project, new.rowid);
END;
