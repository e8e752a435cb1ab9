-- Imports now take a use count of 0 to 2^40; counts already out of that
-- range (a negative one, or one so large its next use would overflow)
-- are brought into it.
UPDATE records SET use_count = CASE WHEN use_count < 0 THEN 0 ELSE 1099511627776 END
	WHERE use_count < 0 OR use_count > 1099511627776;
