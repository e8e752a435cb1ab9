-- Recall reads each type's records in the order the weave packs them, so
-- that the first records read are the ones the block takes: facts by
-- confidence, use count and recency, procedures by use count and recency,
-- where recency is the later of the last change and the last use.
DROP INDEX records_weave;
CREATE INDEX records_weave ON records (type, confidence DESC, use_count DESC,
	max(updated_at, coalesce(last_accessed_at, 0)) DESC, key);
CREATE INDEX records_weave_use ON records (type, use_count DESC,
	max(updated_at, coalesce(last_accessed_at, 0)) DESC, key);
