-- +goose Up
-- A report by conversation over a range that holds most of the scope's invocations
-- reads the conversation sums less the invocations outside the range
-- (docs/costs.md, "Ranges"); it must know which conversations kept a call in the
-- range, so the sums' index holds their calls too and the report still reads it alone.
-- calls changes with the float8 copies the index already holds, so the saves' updates
-- were not HOT before either.
ALTER TABLE cost_usage_conversations DROP CONSTRAINT cost_usage_conversations_pkey,
    ADD PRIMARY KEY (tenant_id, project_id, conversation_id, model_no) INCLUDE (uncached_f, cached_f, output_f, calls);

-- +goose Down
ALTER TABLE cost_usage_conversations DROP CONSTRAINT cost_usage_conversations_pkey,
    ADD PRIMARY KEY (tenant_id, project_id, conversation_id, model_no) INCLUDE (uncached_f, cached_f, output_f);
