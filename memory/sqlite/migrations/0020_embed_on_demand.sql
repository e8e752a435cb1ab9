-- The embedding queue is fed from the first time the database is asked
-- about embeddings (see wantEmbeddings in memory/semantic), which queues every record
-- then. Until that, a write queues nothing: the queue's trigger was a
-- fifth of a note's write (an insert, a delete, the autoincrement's
-- counter) for a store that may never embed. A database that has
-- embedded already, or had an embedding server, wants them from now on.
CREATE TABLE embed_wanted (
	id INTEGER PRIMARY KEY CHECK (id = 1)
);
INSERT INTO embed_wanted (id)
	SELECT 1 WHERE EXISTS (SELECT 1 FROM embed_vectors) OR EXISTS (SELECT 1 FROM embed_lease);

DROP TRIGGER embed_records_insert;
CREATE TRIGGER embed_records_insert AFTER INSERT ON records
WHEN EXISTS (SELECT 1 FROM embed_wanted)
BEGIN
	DELETE FROM embed_queue WHERE rid = new.rowid;
	INSERT INTO embed_queue (rid) VALUES (new.rowid);
END;

-- A changed record's vectors go whether or not it is queued.
DROP TRIGGER embed_records_update;
CREATE TRIGGER embed_records_update AFTER UPDATE OF project, scope, key, description, body, tags ON records
WHEN old.project IS NOT new.project OR old.scope IS NOT new.scope OR old.key IS NOT new.key
	OR old.description IS NOT new.description OR old.body IS NOT new.body OR old.tags IS NOT new.tags
BEGIN
	DELETE FROM embed_vectors WHERE rid = old.rowid;
	DELETE FROM embed_queue WHERE rid = old.rowid;
	INSERT INTO embed_queue (rid) SELECT new.rowid WHERE EXISTS (SELECT 1 FROM embed_wanted);
END;
