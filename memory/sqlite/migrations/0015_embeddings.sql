-- Vectors of records, as an embeddings model gave them for the record's
-- text: little-endian float32s of unit length. Each is tagged with its
-- model and dimensions; a search reads only the vectors of the model it
-- embedded the query with, so two models' vectors never mix.
CREATE TABLE embed_vectors (
	rid   INTEGER NOT NULL,
	model TEXT    NOT NULL,
	dims  INTEGER NOT NULL,
	vec   BLOB    NOT NULL,
	PRIMARY KEY (rid, model)
);
CREATE INDEX embed_vectors_model ON embed_vectors (model, dims);

-- Records waiting to be embedded. A record joins (or rejoins, under a new
-- seq) whenever it is stored or its text changes, whether or not an
-- endpoint is configured, so the queue outlives restarts and endpoints
-- that are down. A vector is kept only if its queue row still has the seq
-- read before embedding: a record changed meanwhile is embedded again.
CREATE TABLE embed_queue (
	seq   INTEGER PRIMARY KEY AUTOINCREMENT,
	rid   INTEGER NOT NULL UNIQUE,
	tries INTEGER NOT NULL DEFAULT 0
);

-- A change sequence of the vectors, one row per record, read by the
-- vector index each process keeps in memory to catch up.
CREATE TABLE embed_changes (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	rid INTEGER NOT NULL UNIQUE
);

INSERT INTO embed_queue (rid) SELECT rowid FROM records ORDER BY rowid;

CREATE TRIGGER embed_records_insert AFTER INSERT ON records BEGIN
	DELETE FROM embed_queue WHERE rid = new.rowid;
	INSERT INTO embed_queue (rid) VALUES (new.rowid);
END;

CREATE TRIGGER embed_records_update AFTER UPDATE OF project, scope, key, description, body, tags ON records
WHEN old.project IS NOT new.project OR old.scope IS NOT new.scope OR old.key IS NOT new.key
	OR old.description IS NOT new.description OR old.body IS NOT new.body OR old.tags IS NOT new.tags
BEGIN
	DELETE FROM embed_vectors WHERE rid = old.rowid;
	DELETE FROM embed_queue WHERE rid = old.rowid;
	INSERT INTO embed_queue (rid) VALUES (new.rowid);
END;

CREATE TRIGGER embed_records_delete AFTER DELETE ON records BEGIN
	DELETE FROM embed_vectors WHERE rid = old.rowid;
	DELETE FROM embed_queue WHERE rid = old.rowid;
END;

CREATE TRIGGER embed_vectors_insert AFTER INSERT ON embed_vectors BEGIN
	DELETE FROM embed_changes WHERE rid = new.rid;
	INSERT INTO embed_changes (rid) VALUES (new.rid);
END;

CREATE TRIGGER embed_vectors_delete AFTER DELETE ON embed_vectors BEGIN
	DELETE FROM embed_changes WHERE rid = old.rid;
	INSERT INTO embed_changes (rid) VALUES (old.rid);
END;

-- Which process embeds the queue: several servers share a database (one
-- per agent), and a record needs embedding once. A holder renews its lease
-- while it works; another takes over once it runs out.
CREATE TABLE embed_lease (
	id     INTEGER PRIMARY KEY CHECK (id = 1),
	holder TEXT    NOT NULL,
	until  INTEGER NOT NULL
);
