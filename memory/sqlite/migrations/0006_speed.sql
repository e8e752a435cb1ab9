-- Indexes in the orders reads walk, so a page or a recall stops after the
-- rows it shows instead of sorting every record.
CREATE INDEX records_list ON records (key, type);
CREATE INDEX records_weave ON records (type, confidence DESC, use_count DESC, updated_at DESC, key);

-- A counter that moves whenever what a count of effective records depends
-- on changes (not on use counts), so counts can be kept between reads.
CREATE TABLE generation (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	n  INTEGER NOT NULL
);
INSERT INTO generation (id, n) VALUES (1, 0);

CREATE TRIGGER records_insert_gen AFTER INSERT ON records BEGIN
	UPDATE generation SET n = n + 1 WHERE id = 1;
END;

CREATE TRIGGER records_delete_gen AFTER DELETE ON records BEGIN
	UPDATE generation SET n = n + 1 WHERE id = 1;
END;

CREATE TRIGGER records_update_gen AFTER UPDATE OF project, scope, type, key, expires_at ON records BEGIN
	UPDATE generation SET n = n + 1 WHERE id = 1;
END;
