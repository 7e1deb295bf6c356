-- +goose Up
-- Export artifacts (docs/export.md): an export operation streams the
-- scope's records into the agent-context-ndjson/v1 format and stores the stream cut
-- into chunks of at most 1 MiB. The A2A snapshot stores its document the same way
-- (format a2a-snapshot/v1, evidence key proof:a2a-snapshot-v1).
--
-- state: building while the export runs, ready once every chunk and the whole-artifact
-- SHA-256 are stored, deleting from the moment a conversation whose records it holds is
-- tombstoned (it is then gone for every route, and the deletion job removes it).
-- "expired" is not stored: a ready artifact whose expires_at_ms has passed reads as
-- expired until the purge job removes it.
CREATE TABLE export_artifacts (
    tenant_id      text    NOT NULL,
    project_id     text    NOT NULL,
    artifact_id    text    NOT NULL,
    operation_id   text    NOT NULL,
    format         text    NOT NULL CHECK (format IN ('agent-context-ndjson/v1', 'a2a-snapshot/v1')),
    evidence_key   text,
    state          text    NOT NULL CHECK (state IN ('building', 'ready', 'deleting')),
    chunk_count    integer NOT NULL DEFAULT 0 CHECK (chunk_count >= 0),
    total_bytes    bigint  NOT NULL DEFAULT 0 CHECK (total_bytes >= 0),
    sha256         text,
    created_at_ms  bigint  NOT NULL,
    expires_at_ms  bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, artifact_id),
    CHECK (state <> 'ready' OR sha256 IS NOT NULL)
);

-- An export's steps find their artifact by the operation.
CREATE INDEX export_artifacts_by_operation
    ON export_artifacts (tenant_id, project_id, operation_id);

-- export_chunks holds the bytes of an artifact, chunk by chunk, each with its own
-- SHA-256. The data is stored uncompressed (STORAGE EXTERNAL): compressing a gigabyte
-- of chunks would cost the export more time than the disk it saves.
CREATE TABLE export_chunks (
    tenant_id    text    NOT NULL,
    project_id   text    NOT NULL,
    artifact_id  text    NOT NULL,
    chunk_index  integer NOT NULL CHECK (chunk_index >= 0),
    data         bytea   NOT NULL,
    sha256       text    NOT NULL,
    PRIMARY KEY (tenant_id, project_id, artifact_id, chunk_index),
    FOREIGN KEY (tenant_id, project_id, artifact_id)
        REFERENCES export_artifacts (tenant_id, project_id, artifact_id) ON DELETE CASCADE
);
ALTER TABLE export_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- export_artifact_conversations records which conversations' records an artifact
-- holds (IDs only), written in the export step that writes them. Deleting a
-- conversation marks those artifacts deleting and removes them.
CREATE TABLE export_artifact_conversations (
    tenant_id        text NOT NULL,
    project_id       text NOT NULL,
    conversation_id  text NOT NULL,
    artifact_id      text NOT NULL,
    PRIMARY KEY (tenant_id, project_id, conversation_id, artifact_id),
    FOREIGN KEY (tenant_id, project_id, artifact_id)
        REFERENCES export_artifacts (tenant_id, project_id, artifact_id) ON DELETE CASCADE
);
CREATE INDEX export_artifact_conversations_by_artifact
    ON export_artifact_conversations (tenant_id, project_id, artifact_id);

-- An export of one conversation walks its windows (with their items), derivations and
-- entries in ID order: the conversation indexes (which deletion uses too) gain the ID
-- (and the item's ordinal) as their last columns, so each step is an index range.
DROP INDEX context_windows_by_conversation;
CREATE INDEX context_windows_by_conversation
    ON context_windows (tenant_id, project_id, conversation_id, window_id);
DROP INDEX context_window_items_by_conversation;
CREATE INDEX context_window_items_by_conversation
    ON context_window_items (tenant_id, project_id, conversation_id, window_id, ordinal);
DROP INDEX window_derivations_by_conversation;
CREATE INDEX window_derivations_by_conversation
    ON window_derivations (tenant_id, project_id, conversation_id, derivation_id);
DROP INDEX context_entries_by_conversation;
CREATE INDEX context_entries_by_conversation
    ON context_entries (tenant_id, project_id, conversation_id, entry_id);

-- purge_expired_entries walks the entries whose expiry has passed, oldest expiry first.
CREATE INDEX context_entries_by_expiry
    ON context_entries (tenant_id, project_id, expires_at_ms, entry_id) WHERE expires_at_ms IS NOT NULL;

-- +goose Down
DROP INDEX context_entries_by_expiry;
DROP INDEX context_entries_by_conversation;
CREATE INDEX context_entries_by_conversation
    ON context_entries (tenant_id, project_id, conversation_id);
DROP INDEX window_derivations_by_conversation;
CREATE INDEX window_derivations_by_conversation
    ON window_derivations (tenant_id, project_id, conversation_id);
DROP INDEX context_window_items_by_conversation;
CREATE INDEX context_window_items_by_conversation
    ON context_window_items (tenant_id, project_id, conversation_id);
DROP INDEX context_windows_by_conversation;
CREATE INDEX context_windows_by_conversation
    ON context_windows (tenant_id, project_id, conversation_id);
DROP TABLE export_artifact_conversations;
DROP TABLE export_chunks;
DROP TABLE export_artifacts;
