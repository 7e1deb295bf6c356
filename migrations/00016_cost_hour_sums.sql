-- +goose Up
-- A report by conversation over a range read its invocations twice: once to rank the
-- conversations, once more to total the range by model (docs/costs.md, "Ranges by
-- conversation"). The totals now come from running sums by hour: cost_usage gains the
-- grouping 'hour', keyed by the start of the hour of the invocations' started_at_ms,
-- written and taken off by the same triggers as the agent and tool sums, in the same
-- shards and in the same single upsert in key order (so two writers still lock their
-- rows in one order). A range's totals are its whole hours' sums plus the invocations
-- of its two partial hours. And the conversation index holds the columns the ranking
-- reads, so that it reads the range's invocations in conversation order from the index
-- alone and sums each conversation as it comes, without a hash table of 100,000 keys.

-- cost_usage_hour is the key of an invocation's hour: the start of its hour in ms,
-- zero-padded to the 19 digits of any bigint, so that the keys sort (as text, in any
-- collation) in the order of the hours.
CREATE FUNCTION cost_usage_hour(started_at_ms bigint) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN lpad((started_at_ms - started_at_ms % 3600000)::text, 19, '0');

-- No invocation is written until the migration commits (a writer in flight finishes
-- first), so that the hour sums below count each one exactly once.
LOCK TABLE model_invocations IN SHARE MODE;

ALTER TABLE cost_usage DROP CONSTRAINT cost_usage_grouping_check,
    ADD CONSTRAINT cost_usage_grouping_check CHECK (grouping IN ('agent', 'tool', 'hour'));

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
    UNION ALL
    SELECT d.tenant_id, d.project_id, 'hour', cost_usage_hour(d.started_at_ms), m.model_no,
        cost_usage_shard(d.invocation_id), count(*), sum(d.input_tokens), sum(d.output_tokens), sum(d.cached_tokens)
    FROM delta_rows d
    JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
    GROUP BY 1, 2, 3, 4, 5, 6
    ORDER BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (tenant_id, project_id, grouping, key, model_no, shard) DO UPDATE
    SET calls = u.calls + excluded.calls, input_tokens = u.input_tokens + excluded.input_tokens,
        output_tokens = u.output_tokens + excluded.output_tokens, cached_tokens = u.cached_tokens + excluded.cached_tokens;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cost_usage_subtract() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    wanted bigint;
    changed bigint;
BEGIN
    PERFORM 1
    FROM cost_usage_conversations u
    JOIN (SELECT DISTINCT d.tenant_id, d.project_id, d.conversation_id, m.model_no
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model) k
        ON u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.conversation_id = k.conversation_id
            AND u.model_no = k.model_no
    ORDER BY u.tenant_id, u.project_id, u.conversation_id, u.model_no
    FOR UPDATE OF u;
    UPDATE cost_usage_conversations u
    SET calls = u.calls - k.calls, input_tokens = u.input_tokens - k.input, output_tokens = u.output_tokens - k.output,
        cached_tokens = u.cached_tokens - k.cached
    FROM (SELECT d.tenant_id, d.project_id, d.conversation_id, m.model_no, count(*) AS calls,
              sum(d.input_tokens) AS input, sum(d.output_tokens) AS output, sum(d.cached_tokens) AS cached
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
          GROUP BY 1, 2, 3, 4) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.conversation_id = k.conversation_id
        AND u.model_no = k.model_no;
    GET DIAGNOSTICS changed = ROW_COUNT;
    SELECT count(*) INTO wanted FROM (SELECT DISTINCT tenant_id, project_id, conversation_id, model FROM delta_rows) k;
    IF changed <> wanted THEN
        RAISE EXCEPTION 'cost sums: % of % conversation sums found', changed, wanted;
    END IF;
    DELETE FROM cost_usage_conversations u
    USING (SELECT DISTINCT tenant_id, project_id, conversation_id FROM delta_rows) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.conversation_id = k.conversation_id
        AND u.calls = 0;

    PERFORM 1
    FROM cost_usage u
    JOIN (SELECT DISTINCT d.tenant_id, d.project_id, g.grouping, g.key, m.model_no,
              cost_usage_shard(d.invocation_id) AS shard
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
          CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, '')),
              ('hour', cost_usage_hour(d.started_at_ms))) g(grouping, key)) k
        ON u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.grouping = k.grouping AND u.key = k.key
            AND u.model_no = k.model_no AND u.shard = k.shard
    ORDER BY u.tenant_id, u.project_id, u.grouping, u.key, u.model_no, u.shard
    FOR UPDATE OF u;
    UPDATE cost_usage u
    SET calls = u.calls - k.calls, input_tokens = u.input_tokens - k.input, output_tokens = u.output_tokens - k.output,
        cached_tokens = u.cached_tokens - k.cached
    FROM (SELECT d.tenant_id, d.project_id, g.grouping, g.key, m.model_no, cost_usage_shard(d.invocation_id) AS shard,
              count(*) AS calls, sum(d.input_tokens) AS input, sum(d.output_tokens) AS output,
              sum(d.cached_tokens) AS cached
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
          CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, '')),
              ('hour', cost_usage_hour(d.started_at_ms))) g(grouping, key)
          GROUP BY 1, 2, 3, 4, 5, 6) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.grouping = k.grouping AND u.key = k.key
        AND u.model_no = k.model_no AND u.shard = k.shard;
    GET DIAGNOSTICS changed = ROW_COUNT;
    SELECT count(*) INTO wanted
    FROM (SELECT DISTINCT d.tenant_id, d.project_id, g.grouping, g.key, d.model, cost_usage_shard(d.invocation_id)
          FROM delta_rows d
          CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, '')),
              ('hour', cost_usage_hour(d.started_at_ms))) g(grouping, key)) k;
    IF changed <> wanted THEN
        RAISE EXCEPTION 'cost sums: % of % agent and tool sums found', changed, wanted;
    END IF;
    DELETE FROM cost_usage u
    USING (SELECT DISTINCT d.tenant_id, d.project_id, g.grouping, g.key
           FROM delta_rows d
           CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, '')),
              ('hour', cost_usage_hour(d.started_at_ms))) g(grouping, key)) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.grouping = k.grouping AND u.key = k.key
        AND u.calls = 0;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The hour sums of the invocations already saved.
INSERT INTO cost_usage
    (tenant_id, project_id, grouping, key, model_no, shard, calls, input_tokens, output_tokens, cached_tokens)
SELECT i.tenant_id, i.project_id, 'hour', cost_usage_hour(i.started_at_ms), m.model_no,
    cost_usage_shard(i.invocation_id), count(*), sum(i.input_tokens), sum(i.output_tokens), sum(i.cached_tokens)
FROM model_invocations i
JOIN cost_models m ON m.tenant_id = i.tenant_id AND m.project_id = i.project_id AND m.model = i.model
GROUP BY 1, 2, 3, 4, 5, 6;

DROP INDEX model_invocations_by_conversation;
CREATE INDEX model_invocations_by_conversation
    ON model_invocations (tenant_id, project_id, conversation_id, started_at_ms)
    INCLUDE (model, input_tokens, output_tokens, cached_tokens);

-- +goose Down
DROP INDEX model_invocations_by_conversation;
CREATE INDEX model_invocations_by_conversation
    ON model_invocations (tenant_id, project_id, conversation_id, started_at_ms);
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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION cost_usage_subtract() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    wanted bigint;
    changed bigint;
BEGIN
    PERFORM 1
    FROM cost_usage_conversations u
    JOIN (SELECT DISTINCT d.tenant_id, d.project_id, d.conversation_id, m.model_no
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model) k
        ON u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.conversation_id = k.conversation_id
            AND u.model_no = k.model_no
    ORDER BY u.tenant_id, u.project_id, u.conversation_id, u.model_no
    FOR UPDATE OF u;
    UPDATE cost_usage_conversations u
    SET calls = u.calls - k.calls, input_tokens = u.input_tokens - k.input, output_tokens = u.output_tokens - k.output,
        cached_tokens = u.cached_tokens - k.cached
    FROM (SELECT d.tenant_id, d.project_id, d.conversation_id, m.model_no, count(*) AS calls,
              sum(d.input_tokens) AS input, sum(d.output_tokens) AS output, sum(d.cached_tokens) AS cached
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
          GROUP BY 1, 2, 3, 4) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.conversation_id = k.conversation_id
        AND u.model_no = k.model_no;
    GET DIAGNOSTICS changed = ROW_COUNT;
    SELECT count(*) INTO wanted FROM (SELECT DISTINCT tenant_id, project_id, conversation_id, model FROM delta_rows) k;
    IF changed <> wanted THEN
        RAISE EXCEPTION 'cost sums: % of % conversation sums found', changed, wanted;
    END IF;
    DELETE FROM cost_usage_conversations u
    USING (SELECT DISTINCT tenant_id, project_id, conversation_id FROM delta_rows) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.conversation_id = k.conversation_id
        AND u.calls = 0;

    PERFORM 1
    FROM cost_usage u
    JOIN (SELECT DISTINCT d.tenant_id, d.project_id, g.grouping, g.key, m.model_no,
              cost_usage_shard(d.invocation_id) AS shard
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
          CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, ''))) g(grouping, key)) k
        ON u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.grouping = k.grouping AND u.key = k.key
            AND u.model_no = k.model_no AND u.shard = k.shard
    ORDER BY u.tenant_id, u.project_id, u.grouping, u.key, u.model_no, u.shard
    FOR UPDATE OF u;
    UPDATE cost_usage u
    SET calls = u.calls - k.calls, input_tokens = u.input_tokens - k.input, output_tokens = u.output_tokens - k.output,
        cached_tokens = u.cached_tokens - k.cached
    FROM (SELECT d.tenant_id, d.project_id, g.grouping, g.key, m.model_no, cost_usage_shard(d.invocation_id) AS shard,
              count(*) AS calls, sum(d.input_tokens) AS input, sum(d.output_tokens) AS output,
              sum(d.cached_tokens) AS cached
          FROM delta_rows d
          JOIN cost_models m ON m.tenant_id = d.tenant_id AND m.project_id = d.project_id AND m.model = d.model
          CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, ''))) g(grouping, key)
          GROUP BY 1, 2, 3, 4, 5, 6) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.grouping = k.grouping AND u.key = k.key
        AND u.model_no = k.model_no AND u.shard = k.shard;
    GET DIAGNOSTICS changed = ROW_COUNT;
    SELECT count(*) INTO wanted
    FROM (SELECT DISTINCT d.tenant_id, d.project_id, g.grouping, g.key, d.model, cost_usage_shard(d.invocation_id)
          FROM delta_rows d
          CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, ''))) g(grouping, key)) k;
    IF changed <> wanted THEN
        RAISE EXCEPTION 'cost sums: % of % agent and tool sums found', changed, wanted;
    END IF;
    DELETE FROM cost_usage u
    USING (SELECT DISTINCT d.tenant_id, d.project_id, g.grouping, g.key
           FROM delta_rows d
           CROSS JOIN LATERAL (VALUES ('agent', d.agent_id), ('tool', coalesce(d.tool_name, ''))) g(grouping, key)) k
    WHERE u.tenant_id = k.tenant_id AND u.project_id = k.project_id AND u.grouping = k.grouping AND u.key = k.key
        AND u.calls = 0;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

DELETE FROM cost_usage WHERE grouping = 'hour';
ALTER TABLE cost_usage DROP CONSTRAINT cost_usage_grouping_check,
    ADD CONSTRAINT cost_usage_grouping_check CHECK (grouping IN ('agent', 'tool'));
DROP FUNCTION cost_usage_hour(bigint);
