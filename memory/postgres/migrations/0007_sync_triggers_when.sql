-- The sync triggers of 0005 ran their function for every row written:
-- project records, and every flush of use counts. They now fire only for
-- rows of the shared scopes, and an update only when a column a change
-- carries is set, as SQLite's triggers do.
DROP TRIGGER sync_records_insert ON records;
DROP TRIGGER sync_records_delete ON records;
DROP TRIGGER sync_records_update ON records;
CREATE TRIGGER sync_records_insert AFTER INSERT ON records FOR EACH ROW
	WHEN (NEW.scope > 0) EXECUTE FUNCTION sync_records_insert();
CREATE TRIGGER sync_records_delete AFTER DELETE ON records FOR EACH ROW
	WHEN (OLD.scope > 0) EXECUTE FUNCTION sync_records_delete();
CREATE TRIGGER sync_records_update
	AFTER UPDATE OF project, scope, type, key, description, body, tags, confidence, metadata ON records FOR EACH ROW
	WHEN (OLD.scope > 0 OR NEW.scope > 0) EXECUTE FUNCTION sync_records_update();
