-- Team sync (memory/team on the team server, memory/teamsync on a
-- machine). Once sync_on has its row, every change of a workspace, tenant
-- or system record leaves its name in sync_outbox, in the transaction of
-- the change, from whichever writer: tools, the command line, import,
-- capture, restore, a move. While sync_applying has its row (only ever
-- inside the transaction that applies changes from elsewhere), nothing is
-- queued, so a change that came from the team never goes back to it. A
-- store that never syncs queues nothing.
CREATE TABLE sync_on (
	id INTEGER PRIMARY KEY CHECK (id = 1)
);
CREATE TABLE sync_applying (
	id INTEGER PRIMARY KEY CHECK (id = 1)
);

-- A change to send. While change_id is NULL the change is open: later
-- writes of the same name fold into it (the unique index), and what is
-- sent is the record as it is when the change closes. A closed change has
-- its id, operation, base (the server's seq of the version it was made
-- on) and record, frozen, so that sending it again sends the same change;
-- seq is the server's, once it has said it stored it.
CREATE TABLE sync_outbox (
	id         INTEGER PRIMARY KEY,
	bucket     TEXT    NOT NULL,
	scope      INTEGER NOT NULL,
	type       TEXT    NOT NULL,
	key        TEXT    NOT NULL,
	change_id  TEXT,
	op         TEXT    NOT NULL DEFAULT '',
	base       INTEGER NOT NULL DEFAULT 0,
	record     TEXT    NOT NULL DEFAULT '',
	seq        INTEGER,
	created_at INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX sync_outbox_open ON sync_outbox (bucket, scope, type, key) WHERE change_id IS NULL;
CREATE UNIQUE INDEX sync_outbox_change ON sync_outbox (change_id);
CREATE INDEX sync_outbox_name ON sync_outbox (scope, type, key);

-- The server's seq of the latest version of each name: on the server, the
-- latest change it accepted; on a machine, the version it holds.
CREATE TABLE sync_names (
	bucket TEXT    NOT NULL,
	scope  INTEGER NOT NULL,
	type   TEXT    NOT NULL,
	key    TEXT    NOT NULL,
	seq    INTEGER NOT NULL,
	PRIMARY KEY (bucket, scope, type, key)
);

-- The server's log: every change it accepted, in its order.
CREATE TABLE sync_log (
	seq       INTEGER PRIMARY KEY,
	change_id TEXT    NOT NULL UNIQUE,
	machine   TEXT    NOT NULL,
	bucket    TEXT    NOT NULL,
	scope     INTEGER NOT NULL,
	type      TEXT    NOT NULL,
	key       TEXT    NOT NULL,
	op        TEXT    NOT NULL,
	record    TEXT    NOT NULL,
	base      INTEGER NOT NULL,
	replaced  INTEGER NOT NULL DEFAULT 0,
	at        INTEGER NOT NULL
);
CREATE INDEX sync_log_bucket ON sync_log (bucket, seq);

-- Versions that lost: the change that won (seq) and the one it replaced,
-- both as the wire gives them.
CREATE TABLE sync_conflicts (
	id     INTEGER PRIMARY KEY,
	bucket TEXT    NOT NULL,
	seq    INTEGER NOT NULL,
	scope  INTEGER NOT NULL,
	type   TEXT    NOT NULL,
	key    TEXT    NOT NULL,
	winner TEXT    NOT NULL,
	loser  TEXT    NOT NULL,
	at     INTEGER NOT NULL
);

-- Changes set aside: refused by the server, or pulled and refused here.
CREATE TABLE sync_aside (
	id        INTEGER PRIMARY KEY,
	change_id TEXT    NOT NULL,
	dir       TEXT    NOT NULL,
	scope     INTEGER NOT NULL,
	type      TEXT    NOT NULL,
	key       TEXT    NOT NULL,
	reason    TEXT    NOT NULL,
	at        INTEGER NOT NULL
);

CREATE TABLE sync_meta (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);

CREATE TRIGGER sync_records_insert AFTER INSERT ON records
WHEN new.scope > 0 AND EXISTS (SELECT 1 FROM sync_on) AND NOT EXISTS (SELECT 1 FROM sync_applying)
BEGIN
	INSERT INTO sync_outbox (bucket, scope, type, key) VALUES (new.project, new.scope, new.type, new.key) ON CONFLICT DO NOTHING;
END;

-- A record purged because it expired is not a change: every machine
-- expires it by itself.
CREATE TRIGGER sync_records_delete AFTER DELETE ON records
WHEN old.scope > 0 AND (old.expires_at IS NULL OR old.expires_at > CAST((julianday('now') - 2440587.5) * 86400000000000.0 AS INTEGER))
	AND EXISTS (SELECT 1 FROM sync_on) AND NOT EXISTS (SELECT 1 FROM sync_applying)
BEGIN
	INSERT INTO sync_outbox (bucket, scope, type, key) VALUES (old.project, old.scope, old.type, old.key) ON CONFLICT DO NOTHING;
END;

-- Use counts and access times are this machine's own; an expiry refreshed
-- by rewriting the same content is not a change either.
CREATE TRIGGER sync_records_update AFTER UPDATE OF project, scope, type, key, description, body, tags, confidence, metadata ON records
WHEN (old.scope > 0 OR new.scope > 0) AND (old.project IS NOT new.project OR old.scope IS NOT new.scope OR old.type IS NOT new.type
	OR old.key IS NOT new.key OR old.description IS NOT new.description OR old.body IS NOT new.body OR old.tags IS NOT new.tags
	OR old.confidence IS NOT new.confidence OR old.metadata IS NOT new.metadata)
	AND EXISTS (SELECT 1 FROM sync_on) AND NOT EXISTS (SELECT 1 FROM sync_applying)
BEGIN
	INSERT INTO sync_outbox (bucket, scope, type, key) SELECT old.project, old.scope, old.type, old.key
		WHERE old.scope > 0 AND (old.project IS NOT new.project OR old.scope IS NOT new.scope OR old.type IS NOT new.type OR old.key IS NOT new.key)
		ON CONFLICT DO NOTHING;
	INSERT INTO sync_outbox (bucket, scope, type, key) SELECT new.project, new.scope, new.type, new.key WHERE new.scope > 0
		ON CONFLICT DO NOTHING;
END;
