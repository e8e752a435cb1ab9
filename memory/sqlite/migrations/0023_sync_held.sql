-- On a machine: the team's latest change of a name, pulled while a change
-- of this machine's to the same name waited to be sent, and so not
-- applied (the server orders the waiting one after it, and it wins). It
-- is dropped once the server stores the waiting change, and applied if
-- the server refuses that change, so that the team's version is not lost
-- here.
CREATE TABLE sync_held (
	scope  INTEGER NOT NULL,
	type   TEXT    NOT NULL,
	key    TEXT    NOT NULL,
	seq    INTEGER NOT NULL,
	change TEXT    NOT NULL,
	PRIMARY KEY (scope, type, key)
);
