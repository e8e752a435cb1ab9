-- A statement that sessions confirm may be as long as the fact it becomes
-- (a body: 64 KiB), past what one entry of a B-tree index holds (about
-- 2.7 kB, 8 kB compressed). statement_sessions is unique on the
-- statement's digest instead of the statement, and is searched by
-- statement through a hash index, whose entries hold a hash of the value
-- only.
ALTER TABLE statement_sessions DROP CONSTRAINT statement_sessions_pkey;
CREATE UNIQUE INDEX statement_sessions_key ON statement_sessions (project, md5(statement), session_id);
CREATE INDEX statement_sessions_statement ON statement_sessions USING hash (statement);
