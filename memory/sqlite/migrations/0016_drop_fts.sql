-- Search runs on the index each process keeps in memory (see
-- 0011_search_changes.sql); nothing reads the full-text table any more, and
-- keeping it cost every write a second copy of the record's text.
DROP TABLE IF EXISTS records_fts;
