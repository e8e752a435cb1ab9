-- Bearer tokens for serving a team over HTTP. Only a SHA-256 of each token
-- is kept: a token is 256 random bits, so a plain hash is as good as a slow
-- one and lets every request be checked with one indexed read. A revoked
-- token's row is deleted.
CREATE TABLE tokens (
	id           TEXT    PRIMARY KEY,
	hash         TEXT    NOT NULL UNIQUE,
	name         TEXT    NOT NULL DEFAULT '',
	tenant       TEXT    NOT NULL,
	user         TEXT    NOT NULL,
	profile      TEXT    NOT NULL,
	admin        INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	last_used_at INTEGER
);
