-- Derived text worth keeping between processes, such as the initialize
-- instructions, which need the tokenizer that a fresh process has not
-- loaded yet.
CREATE TABLE cache (
	project TEXT NOT NULL,
	name    TEXT NOT NULL,
	value   TEXT NOT NULL,
	PRIMARY KEY (project, name)
);
