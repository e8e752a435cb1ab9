-- Which sessions confirmed which normalised statement, and in which
-- sessions a procedure succeeded: counting distinct sessions makes a
-- repeated capture of one session count nothing twice.
CREATE TABLE statement_sessions (
	project    TEXT NOT NULL,
	statement  TEXT NOT NULL, -- normalised
	session_id TEXT NOT NULL,
	said       TEXT NOT NULL, -- as the session put it
	PRIMARY KEY (project, statement, session_id)
);

CREATE TABLE procedure_sessions (
	project    TEXT NOT NULL,
	key        TEXT NOT NULL,
	session_id TEXT NOT NULL,
	PRIMARY KEY (project, key, session_id)
);
