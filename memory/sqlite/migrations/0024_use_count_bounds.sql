-- An import could carry a use count near the top of an int64; the next
-- use overflowed it to a REAL, and reading any list of records failed
-- from then on. Imports now take 0 to 2^40; counts already out of that
-- range are brought into it.
UPDATE records SET use_count = CASE
		WHEN use_count < 0 THEN 0
		WHEN use_count > 1099511627776 THEN 1099511627776
		ELSE CAST(use_count AS INTEGER) END
	WHERE typeof(use_count) <> 'integer' OR use_count < 0 OR use_count > 1099511627776;
