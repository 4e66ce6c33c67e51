-- claimd_in_time(due): true while the wall clock is before `due` (or `due` is NULL), else an
-- error (SQLSTATE CLD01) that aborts the statement calling it, so its writes roll back.
-- Claim calls it after its last lock wait: a caller whose deadline passed while the
-- statement waited is answered DEADLINE_EXCEEDED, and nothing it would have written lands.
CREATE FUNCTION claimd_in_time(due timestamptz) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF due IS NOT NULL AND clock_timestamp() > due THEN
        RAISE EXCEPTION USING
            ERRCODE = 'CLD01',
            MESSAGE = 'the call''s deadline passed before its write could commit';
    END IF;
    RETURN true;
END
$$;
