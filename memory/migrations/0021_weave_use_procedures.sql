-- Only procedures are read in the order of records_weave_use (by use count
-- and recency; see effectiveQuery): the index holds them alone, so that a
-- fact's write changes one page fewer.
DROP INDEX records_weave_use;
CREATE INDEX records_weave_use ON records (type, use_count DESC,
	max(updated_at, coalesce(last_accessed_at, 0)) DESC, key) WHERE type = 'procedural';
