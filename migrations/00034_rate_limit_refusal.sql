-- +goose Up
-- rate_limit_admit ends a rate limit check whose buckets belong to several tenants
-- (a tenant's agent and tool buckets and the global ones) when one tenant's buckets
-- refuse it: each tenant's buckets are checked by a statement of their own (on Citus
-- each tenant's rows sit on their own shard), all in one transaction, and this error
-- rolls back the tokens the others took (docs/rate-limits.md). It returns true when
-- ok, so a statement calls it in a condition (rate_limit_admit(false) where it refuses).
-- +goose StatementBegin
CREATE FUNCTION rate_limit_admit(ok boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT ok THEN
        RAISE EXCEPTION 'rate limit check refused' USING ERRCODE = 'AC429';
    END IF;
    RETURN true;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION rate_limit_admit(boolean);
