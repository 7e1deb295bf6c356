-- +goose Up
-- ended_at_ms is when an entry stopped being active by a transition (superseded,
-- merged or expired by POST /entries/expire), null while it is active: with
-- created_at_ms it is the entry's status history, which recall as of an instant reads
-- (docs/entries.md, "Recall as of an instant"). Transitions so far set updated_at_ms
-- to the same time, and nothing else changes an entry that is no longer active.
ALTER TABLE context_entries ADD COLUMN ended_at_ms bigint;
UPDATE context_entries SET ended_at_ms = updated_at_ms WHERE status <> 'active';
ALTER TABLE context_entries ADD CONSTRAINT context_entries_ended
    CHECK ((status = 'active') = (ended_at_ms IS NULL));

-- +goose Down
ALTER TABLE context_entries DROP CONSTRAINT context_entries_ended;
ALTER TABLE context_entries DROP COLUMN ended_at_ms;
