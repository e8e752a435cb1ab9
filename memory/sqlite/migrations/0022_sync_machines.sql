-- On the team server: whose each machine id is, its first pusher's
-- tenant and user. A pull hands every change's machine id to teammates,
-- and a machine takes a change under its own id for its own; a push under
-- another user's machine id is refused.
CREATE TABLE sync_machines (
	machine   TEXT NOT NULL PRIMARY KEY,
	tenant    TEXT NOT NULL,
	user_name TEXT NOT NULL
);
