-- +goose Up
-- The operator console's sign-in sessions. A session is found by its ID before the
-- scope is known (the ID is the credential), so its key is the SHA-256 of that ID,
-- never the ID itself, and not (tenant_id, project_id): the one table whose key does
-- not lead with the scope, as the scope is what a lookup finds out. The token a
-- session came from is never stored.
CREATE TABLE console_sessions (
    id_hash      bytea       PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    tenant_id    text        NOT NULL,
    project_id   text        NOT NULL,
    subject      text        NOT NULL,
    capabilities text[]      NOT NULL,
    csrf_token   text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);

-- Each sign-in deletes a bounded batch of expired sessions, oldest first.
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- +goose Down
DROP TABLE console_sessions;
