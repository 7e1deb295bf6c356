-- +goose Up
-- The list routes (entries, conversations, windows, model invocations) page newest
-- first: a time descending, then the ID ascending, resumed after the last row of the
-- previous page. Each walk is a range of one of these indexes, whose columns are that
-- order, so a page costs its rows whatever its depth (docs/entries.md, "Lists").

-- last_at_ms is the time of the latest append to the conversation (null: none since
-- the head was created, which then counts as its last activity). Appends set it in the
-- statement that claims the heads.
ALTER TABLE conversations ADD COLUMN last_at_ms bigint;
UPDATE conversations c SET last_at_ms = m.last_at_ms
FROM (
    SELECT tenant_id, project_id, conversation_id, max(created_at_ms) AS last_at_ms
    FROM messages
    GROUP BY tenant_id, project_id, conversation_id
) m
WHERE c.tenant_id = m.tenant_id AND c.project_id = m.project_id AND c.conversation_id = m.conversation_id;
CREATE INDEX conversations_by_activity
    ON conversations (tenant_id, project_id, (coalesce(last_at_ms, created_at_ms)) DESC, conversation_id)
    WHERE deleted_at_ms IS NULL;

-- Entries: the whole scope, by conversation, by status. The time index also serves the
-- watermark (the newest entry) as the old ascending one did.
DROP INDEX context_entries_by_created;
CREATE INDEX context_entries_by_created
    ON context_entries (tenant_id, project_id, created_at_ms DESC, entry_id);
CREATE INDEX context_entries_by_conversation_created
    ON context_entries (tenant_id, project_id, conversation_id, created_at_ms DESC, entry_id);
CREATE INDEX context_entries_by_status_created
    ON context_entries (tenant_id, project_id, status, created_at_ms DESC, entry_id);

CREATE INDEX context_windows_by_created
    ON context_windows (tenant_id, project_id, created_at_ms DESC, window_id);
CREATE INDEX context_windows_by_conversation_created
    ON context_windows (tenant_id, project_id, conversation_id, created_at_ms DESC, window_id);

-- Model invocations need no index of their own: model_invocations_by_time and
-- model_invocations_by_conversation (migration 00016) are walked backwards, and the
-- rare invocations started in the same millisecond are put in ID order by an
-- incremental sort. Every index there costs each save an insertion.

-- +goose Down
DROP INDEX context_windows_by_conversation_created;
DROP INDEX context_windows_by_created;
DROP INDEX context_entries_by_status_created;
DROP INDEX context_entries_by_conversation_created;
DROP INDEX context_entries_by_created;
CREATE INDEX context_entries_by_created
    ON context_entries (tenant_id, project_id, created_at_ms);
DROP INDEX conversations_by_activity;
ALTER TABLE conversations DROP COLUMN last_at_ms;
