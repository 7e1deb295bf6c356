-- +goose Up
-- message_count is the exact number of messages a live conversation holds. Appends add
-- to it in the statements that claim and correct the heads (claimHeads, correctHeads in
-- adapters/postgres/message.go), retention subtracts what it deletes in the statement
-- that deletes it; every other writer of messages must keep it so. A retention run with
-- keepLastMessages skips a conversation whose count is within the policy from its head
-- row alone, without reading a message. A tombstone's count is left as it was: its
-- messages belong to the deletion job.
ALTER TABLE conversations
    ADD COLUMN message_count bigint NOT NULL DEFAULT 0 CHECK (message_count >= 0);

UPDATE conversations c SET message_count = m.n
FROM (
    SELECT tenant_id, project_id, conversation_id, count(*) AS n
    FROM messages
    GROUP BY tenant_id, project_id, conversation_id
) m
WHERE c.tenant_id = m.tenant_id AND c.project_id = m.project_id AND c.conversation_id = m.conversation_id;

-- The age path: retention with maxAgeMs walks the scope's messages older than its
-- cutoff (and only those) in (created_at_ms, conversation_id, sequence) order with a
-- keyset cursor, and search walks it backwards for the newest matches of a common word.
CREATE INDEX messages_by_age
    ON messages (tenant_id, project_id, created_at_ms, conversation_id, sequence);

-- Reads exclude tombstoned conversations; this keeps that check a probe of the few
-- tombstones instead of a scan of every head of the scope.
CREATE INDEX conversations_tombstones
    ON conversations (tenant_id, project_id, conversation_id) WHERE deleted_at_ms IS NOT NULL;

-- retention_touched records, while a retention operation runs, the conversations it has
-- deleted (or, in a dry run, would delete) messages from, so that affectedConversations
-- counts each once although the age walk meets a conversation in many steps. Rows hold
-- IDs only; a run removes its own when it finishes or fails.
CREATE TABLE retention_touched (
    tenant_id        text NOT NULL,
    project_id       text NOT NULL,
    operation_id     text NOT NULL,
    conversation_id  text NOT NULL,
    PRIMARY KEY (tenant_id, project_id, operation_id, conversation_id)
);

-- +goose Down
DROP TABLE retention_touched;
DROP INDEX conversations_tombstones;
DROP INDEX messages_by_age;
ALTER TABLE conversations DROP COLUMN message_count;
