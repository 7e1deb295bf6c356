-- +goose Up
-- Recall under a tag filter first asks how many of the scope's entries pass it: when
-- few do, the text half ranks those entries from their own documents instead of
-- walking the best-scoring entries of the whole scope until enough pass
-- (docs/entries.md, "Cost"). This index finds them; conversation filters already
-- have context_entries_by_conversation.
CREATE INDEX context_entries_by_tags ON context_entries USING gin (tenant_id, project_id, tags);

-- +goose Down
DROP INDEX context_entries_by_tags;
