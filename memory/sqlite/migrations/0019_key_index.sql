-- The shadow check of every read (is a narrower record of this type and
-- key visible?) and the list's order by key and type walk one index with
-- the key first. A second index with the type first served only the
-- shadow check, and cost every write one more page in the log.
DROP INDEX records_name;
DROP INDEX records_list;
CREATE INDEX records_list ON records (key, type, scope);
