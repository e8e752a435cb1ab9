-- Where each project lives on this machine: its identity is a hash of the
-- root, so the root itself is kept to list projects and to move one.
-- Times are Unix nanoseconds, UTC.
CREATE TABLE IF NOT EXISTS project_roots (
	project   TEXT    PRIMARY KEY,
	root      TEXT    NOT NULL,
	last_used INTEGER NOT NULL
);
