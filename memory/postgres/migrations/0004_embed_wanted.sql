-- The twin of SQLite's embed_wanted (0020_embed_on_demand.sql). Here the
-- triggers queue every write for embedding, as they always did, and the
-- row says so.
CREATE TABLE embed_wanted (
	id INTEGER PRIMARY KEY CHECK (id = 1)
);
INSERT INTO embed_wanted (id) VALUES (1);
