-- +goose Up
-- conversations is the head row of every conversation: created implicitly by the first
-- append or window that names it, locked by appenders to allocate sequences without
-- gaps or duplicates, and kept as the tombstone after deletion (deleted_at_ms is set
-- once and never cleared; the row then holds only IDs and times, never content).
CREATE TABLE conversations (
    tenant_id        text   NOT NULL,
    project_id       text   NOT NULL,
    conversation_id  text   NOT NULL,
    last_sequence    bigint NOT NULL DEFAULT 0 CHECK (last_sequence >= 0),
    created_at_ms    bigint NOT NULL,
    deleted_at_ms    bigint,
    PRIMARY KEY (tenant_id, project_id, conversation_id)
);

-- +goose Down
DROP TABLE conversations;
