-- The twin of SQLite's 0021_weave_use_procedures.sql: records_weave_use
-- holds procedures alone, the only records read in its order.
DROP INDEX records_weave_use;
CREATE INDEX records_weave_use ON records (type, use_count DESC,
	greatest(updated_at, coalesce(last_accessed_at, 0)) DESC, key) WHERE type = 'procedural';
