-- +goose Up
-- The vector extension backs the entry projection. On a managed Postgres where the
-- migrating role may not create extensions, an operator creates it beforehand and this
-- statement is a no-op.
CREATE EXTENSION IF NOT EXISTS vector;

-- +goose StatementBegin
DO $$
DECLARE
    v text;
BEGIN
    SELECT extversion INTO v FROM pg_extension WHERE extname = 'vector';
    IF v IS NULL THEN
        RAISE EXCEPTION 'the pgvector extension "vector" is not installed';
    END IF;
    IF string_to_array(split_part(v, '-', 1), '.')::int[] < ARRAY[0, 8] THEN
        RAISE EXCEPTION 'pgvector % is installed; agent-context needs 0.8 or newer (iterative index scans)', v;
    END IF;
END
$$;
-- +goose StatementEnd

-- server_secrets holds keys every replica must share, such as the HMAC key that
-- authenticates pagination cursors. Rows are created once and never rotated in place:
-- a rotation adds a new name. The first replica to need a secret inserts one made from
-- crypto/rand (INSERT ... ON CONFLICT DO NOTHING), so all replicas converge on it.
CREATE TABLE server_secrets (
    name        text PRIMARY KEY,
    secret      bytea NOT NULL CHECK (octet_length(secret) >= 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE server_secrets;
