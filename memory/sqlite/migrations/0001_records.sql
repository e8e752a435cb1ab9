-- Records, partitioned by project identity. Project-scope rows carry the
-- project's identity; workspace, tenant and system rows share the global
-- bucket ''. Times are Unix nanoseconds, UTC.
CREATE TABLE records (
	rowid            INTEGER PRIMARY KEY,
	id               TEXT    NOT NULL UNIQUE,
	project          TEXT    NOT NULL,
	scope            INTEGER NOT NULL,
	type             TEXT    NOT NULL,
	key              TEXT    NOT NULL,
	description      TEXT    NOT NULL DEFAULT '',
	body             TEXT    NOT NULL DEFAULT '',
	tags             TEXT    NOT NULL DEFAULT '[]',
	confidence       REAL    NOT NULL DEFAULT 0.5,
	use_count        INTEGER NOT NULL DEFAULT 0,
	last_accessed_at INTEGER,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	expires_at       INTEGER,
	session_id       TEXT    NOT NULL DEFAULT '',
	source           TEXT    NOT NULL DEFAULT 'tool',
	metadata         TEXT    NOT NULL DEFAULT '{}',
	UNIQUE (project, scope, type, key)
);

-- Resolution looks for a narrower record of the same name.
CREATE INDEX records_name ON records (type, key, scope);
CREATE INDEX records_expiry ON records (expires_at) WHERE expires_at IS NOT NULL;

-- Full-text index over what a search matches, stemmed. FTS4 ships in every
-- build of the driver; FTS5 would need a build tag.
CREATE VIRTUAL TABLE records_fts USING fts4 (key, description, body, tags, tokenize=porter);
