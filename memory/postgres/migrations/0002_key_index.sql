-- As SQLite's 0019_key_index.sql: the shadow check and the list's order
-- by key and type share one index with the key first.
DROP INDEX records_name;
DROP INDEX records_list;
CREATE INDEX records_list ON records (key, type, scope);
