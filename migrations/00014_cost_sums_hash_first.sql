-- +goose Up
-- cost_usage_add (migration 00012) sorted every row a statement inserted by the sums'
-- text keys before it summed them, twice over for the agent and tool sums (each row
-- once as its agent's, once as its tool's): a COPY of 1,000,000 invocations spent
-- ~18 s in the trigger, most of it in two external sorts of 1 and 2 million rows. It
-- now sums by hash first and sorts only the sums, still upserting them in key order
-- (the lock order that keeps two statements from deadlocking). Sorts are disabled
-- inside the function so that the planner, which cannot estimate the groups of a
-- transition table, does not choose them for the grouping; the sorts of the few sums
-- remain, having no alternative. jit is off inside it too: a disabled sort's cost
-- estimate passes every jit threshold, and compiling a one-row save's statements took
-- ~0.8 s. Same sums, ~2-3x faster for a large statement (docs/costs.md).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cost_usage_add() RETURNS trigger LANGUAGE plpgsql
    SET enable_sort = off SET enable_incremental_sort = off SET jit = off AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM delta_rows d
        WHERE NOT EXISTS (SELECT 1 FROM cost_models m
                          WHERE m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model)
    ) THEN
        PERFORM pg_advisory_xact_lock(1129270348, s.h)
        FROM (SELECT DISTINCT hashtext(tenant_id || '/' || project_id) AS h FROM delta_rows ORDER BY 1) s;
        INSERT INTO cost_models (tenant_id, project_id, model, model_no)
        SELECT n.tenant_id, n.project_id, n.model,
            coalesce((SELECT max(m.model_no) FROM cost_models m
                      WHERE m.tenant_id = n.tenant_id AND m.project_id = n.project_id), 0)
                + row_number() OVER (PARTITION BY n.tenant_id, n.project_id ORDER BY n.model)
        FROM (SELECT DISTINCT tenant_id, project_id, model FROM delta_rows) n
        WHERE NOT EXISTS (SELECT 1 FROM cost_models m
                          WHERE m.tenant_id = n.tenant_id AND m.project_id = n.project_id AND m.model = n.model);
    END IF;

    INSERT INTO cost_usage_conversations AS u
        (tenant_id, project_id, conversation_id, model_no, calls, input_tokens, output_tokens, cached_tokens)
    SELECT * FROM (
        SELECT d.tenant_id, d.project_id, d.conversation_id, m.model_no, count(*),
            sum(d.input_tokens), sum(d.output_tokens), sum(d.cached_tokens)
        FROM delta_rows d
        JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
        GROUP BY 1, 2, 3, 4
    ) k
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, project_id, conversation_id, model_no) DO UPDATE
    SET calls = u.calls + excluded.calls, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens, cached_tokens = u.cached_tokens + excluded.cached_tokens;

    INSERT INTO cost_usage AS u
        (tenant_id, project_id, grouping, key, model_no, shard, calls, input_tokens, output_tokens, cached_tokens)
    SELECT k.tenant_id, k.project_id, g.grouping, g.key, k.model_no, k.shard, sum(k.calls),
        sum(k.input), sum(k.output), sum(k.cached)
    FROM (
        SELECT d.tenant_id, d.project_id, d.agent_id, coalesce(d.tool_name, '') AS tool, m.model_no,
            cost_usage_shard(d.invocation_id) AS shard, count(*) AS calls,
            sum(d.input_tokens) AS input, sum(d.output_tokens) AS output, sum(d.cached_tokens) AS cached
        FROM delta_rows d
        JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
        GROUP BY 1, 2, 3, 4, 5, 6
    ) k
    CROSS JOIN LATERAL (VALUES ('agent', k.agent_id), ('tool', k.tool)) g(grouping, key)
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (tenant_id, project_id, grouping, key, model_no, shard) DO UPDATE
    SET calls = u.calls + excluded.calls, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens, cached_tokens = u.cached_tokens + excluded.cached_tokens;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cost_usage_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM delta_rows d
        WHERE NOT EXISTS (SELECT 1 FROM cost_models m
                          WHERE m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model)
    ) THEN
        PERFORM pg_advisory_xact_lock(1129270348, s.h)
        FROM (SELECT DISTINCT hashtext(tenant_id || '/' || project_id) AS h FROM delta_rows ORDER BY 1) s;
        INSERT INTO cost_models (tenant_id, project_id, model, model_no)
        SELECT n.tenant_id, n.project_id, n.model,
            coalesce((SELECT max(m.model_no) FROM cost_models m
                      WHERE m.tenant_id = n.tenant_id AND m.project_id = n.project_id), 0)
                + row_number() OVER (PARTITION BY n.tenant_id, n.project_id ORDER BY n.model)
        FROM (SELECT DISTINCT tenant_id, project_id, model FROM delta_rows) n
        WHERE NOT EXISTS (SELECT 1 FROM cost_models m
                          WHERE m.tenant_id = n.tenant_id AND m.project_id = n.project_id AND m.model = n.model);
    END IF;

    INSERT INTO cost_usage_conversations AS u
        (tenant_id, project_id, conversation_id, model_no, calls, input_tokens, output_tokens, cached_tokens)
    SELECT d.tenant_id, d.project_id, d.conversation_id, m.model_no, count(*),
        sum(d.input_tokens), sum(d.output_tokens), sum(d.cached_tokens)
    FROM delta_rows d
    JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, project_id, conversation_id, model_no) DO UPDATE
    SET calls = u.calls + excluded.calls, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens, cached_tokens = u.cached_tokens + excluded.cached_tokens;

    INSERT INTO cost_usage AS u
        (tenant_id, project_id, grouping, key, model_no, shard, calls, input_tokens, output_tokens, cached_tokens)
    SELECT d.tenant_id, d.project_id, g.grouping, g.key, m.model_no, cost_usage_shard(d.invocation_id), count(*),
        sum(d.input_tokens), sum(d.output_tokens), sum(d.cached_tokens)
    FROM delta_rows d
    JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
    CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, ''))) g(grouping, key)
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (tenant_id, project_id, grouping, key, model_no, shard) DO UPDATE
    SET calls = u.calls + excluded.calls, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens, cached_tokens = u.cached_tokens + excluded.cached_tokens;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
