-- Worker commits fenced at commit time, in one round trip (see PostgresTx.update_leased).

-- The last worker commit's random token: after a connection dies during such a
-- commit, the token on the row says whether it happened.
ALTER TABLE parkway.runs ADD COLUMN commit_token bigint;

-- Fails the transaction (SQLSTATE PKL01) when a lease-fenced update changed no row,
-- so the writes queued behind it never commit.
CREATE FUNCTION parkway.lease_held(changed bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    IF changed = 0 THEN
        RAISE EXCEPTION 'the lease on this run was lost' USING ERRCODE = 'PKL01';
    END IF;
    RETURN changed;
END
$$;
