-- +goose Up
-- The bounds of the console's sessions (docs/console.md).

-- A session of the static token records the fingerprint of that token (never the
-- token), so that the sessions of a token the service no longer has end; a runtime
-- token's session records none, as it ends at the token's exp. The sessions started
-- before this column cannot tell which token started them: they end, and their users
-- sign in again once.
DELETE FROM console_sessions;
ALTER TABLE console_sessions
    ADD COLUMN token_fingerprint bytea CHECK (octet_length(token_fingerprint) = 32);

-- A sign-in ends its principal's oldest live sessions beyond the bound: a range of this
-- index, newest first.
CREATE INDEX console_sessions_by_principal
    ON console_sessions (tenant_id, project_id, subject, created_at);

-- +goose Down
DROP INDEX console_sessions_by_principal;
ALTER TABLE console_sessions DROP COLUMN token_fingerprint;
