-- +goose Up
-- The cost report over every invocation of a scope reads running sums instead of the
-- invocations (docs/costs.md, "Running sums"). They are kept by statement triggers on
-- model_invocations, in the transaction of the statement that inserts or deletes the
-- invocations, so every write path (a save, the deletion job's batches, COPY) keeps
-- them exact. At the end, the rate limiter's buckets stop writing WAL.

-- cost_models numbers the models of a scope 1, 2, 3, … in the order they first
-- appear, so that a report can price a sum of the conversation sums below by its
-- model's position in an array instead of a join per row. Rows are never deleted.
CREATE TABLE cost_models (
    tenant_id  text    NOT NULL,
    project_id text    NOT NULL,
    model      text    NOT NULL,
    model_no   integer NOT NULL CHECK (model_no > 0),
    PRIMARY KEY (tenant_id, project_id, model),
    UNIQUE (tenant_id, project_id, model_no)
);

-- cost_usage sums the invocations by agent (grouping 'agent', key agent_id) and by
-- tool (grouping 'tool', key tool_name, '' for none) per model, each in 16 shards:
-- concurrent saves of one agent or tool update different rows (the shard is a digest
-- of the invocation ID, so the deletion of an invocation finds its shard again). Every
-- save updates its rows: no index covers a column a save changes, and half of every
-- page is left free, so the updates are HOT.
CREATE TABLE cost_usage (
    tenant_id     text     NOT NULL,
    project_id    text     NOT NULL,
    grouping      text     NOT NULL CHECK (grouping IN ('agent', 'tool')),
    key           text     NOT NULL,
    model_no      integer  NOT NULL,
    shard         smallint NOT NULL CHECK (shard >= 0 AND shard < 16),
    calls         bigint   NOT NULL CHECK (calls >= 0),
    input_tokens  numeric  NOT NULL CHECK (input_tokens >= 0),
    output_tokens numeric  NOT NULL CHECK (output_tokens >= 0),
    cached_tokens numeric  NOT NULL CHECK (cached_tokens >= 0),
    PRIMARY KEY (tenant_id, project_id, grouping, key, model_no, shard)
) WITH (fillfactor = 50);

-- cost_usage_conversations sums the invocations by conversation and model. The float8
-- columns are the exact sums rounded once (never accumulated), from which a report
-- ranks 100,000 conversations without a numeric operation per row; the key includes
-- them, so that it reads them in conversation order from the index alone.
CREATE TABLE cost_usage_conversations (
    tenant_id       text    NOT NULL,
    project_id      text    NOT NULL,
    conversation_id text    NOT NULL,
    model_no        integer NOT NULL,
    calls           bigint  NOT NULL CHECK (calls >= 0),
    input_tokens    numeric NOT NULL CHECK (input_tokens >= 0),
    output_tokens   numeric NOT NULL CHECK (output_tokens >= 0),
    cached_tokens   numeric NOT NULL CHECK (cached_tokens >= 0),
    uncached_f      float8  GENERATED ALWAYS AS ((input_tokens - cached_tokens)::float8) STORED,
    cached_f        float8  GENERATED ALWAYS AS (cached_tokens::float8) STORED,
    output_f        float8  GENERATED ALWAYS AS (output_tokens::float8) STORED,
    PRIMARY KEY (tenant_id, project_id, conversation_id, model_no) INCLUDE (uncached_f, cached_f, output_f)
);

-- cost_usage_shard is the shard of an invocation's agent and tool sums: a digest of its
-- ID, the same whenever it is computed, so that the deletion finds the rows the save
-- added to.
CREATE FUNCTION cost_usage_shard(invocation_id text) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN get_byte(decode(md5(invocation_id), 'hex'), 0) & 15;

-- cost_usage_add adds the invocations a statement inserted (its transition table
-- delta_rows) to the sums, one upsert per table in key order, so that two statements
-- touching the same rows lock them in the same order and cannot deadlock. A model new
-- to its scope is numbered first, under an advisory lock of the scope, so that two
-- first uses cannot take one number: the service writes in READ COMMITTED, where the
-- numbering statement, run once the lock is granted, sees the numbers of the
-- transactions that held it before.
-- +goose StatementBegin
CREATE FUNCTION cost_usage_add() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- cost_usage_subtract takes the invocations a statement deleted (delta_rows) off the
-- sums: it locks the rows in key order first (for the same reason), subtracts, and
-- removes the rows whose last invocation went. A row it does not find would mean the
-- sums had drifted from the invocations: it refuses the statement instead.
-- +goose StatementBegin
CREATE FUNCTION cost_usage_subtract() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- +goose StatementBegin
CREATE FUNCTION cost_usage_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM cost_usage;
    DELETE FROM cost_usage_conversations;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION cost_usage_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'model invocations are immutable: the cost sums count them as saved';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER cost_usage_insert AFTER INSERT ON model_invocations
    REFERENCING NEW TABLE AS delta_rows FOR EACH STATEMENT EXECUTE FUNCTION cost_usage_add();
CREATE TRIGGER cost_usage_delete AFTER DELETE ON model_invocations
    REFERENCING OLD TABLE AS delta_rows FOR EACH STATEMENT EXECUTE FUNCTION cost_usage_subtract();
CREATE TRIGGER cost_usage_truncate AFTER TRUNCATE ON model_invocations
    FOR EACH STATEMENT EXECUTE FUNCTION cost_usage_clear();
CREATE TRIGGER cost_usage_update BEFORE UPDATE ON model_invocations
    FOR EACH STATEMENT EXECUTE FUNCTION cost_usage_refuse_update();

-- The sums of the invocations already saved. The triggers above lock the table against
-- writes until the migration commits, so no save falls between the two.
INSERT INTO cost_models (tenant_id, project_id, model, model_no)
SELECT tenant_id, project_id, model, row_number() OVER (PARTITION BY tenant_id, project_id ORDER BY model)
FROM (SELECT DISTINCT tenant_id, project_id, model FROM model_invocations) m;
INSERT INTO cost_usage_conversations
    (tenant_id, project_id, conversation_id, model_no, calls, input_tokens, output_tokens, cached_tokens)
SELECT i.tenant_id, i.project_id, i.conversation_id, m.model_no, count(*),
    sum(i.input_tokens), sum(i.output_tokens), sum(i.cached_tokens)
FROM model_invocations i
JOIN cost_models m ON m.tenant_id = i.tenant_id AND m.project_id = i.project_id AND m.model = i.model
GROUP BY 1, 2, 3, 4;
INSERT INTO cost_usage
    (tenant_id, project_id, grouping, key, model_no, shard, calls, input_tokens, output_tokens, cached_tokens)
SELECT i.tenant_id, i.project_id, g.grouping, g.key, m.model_no,
    cost_usage_shard(i.invocation_id), count(*),
    sum(i.input_tokens), sum(i.output_tokens), sum(i.cached_tokens)
FROM model_invocations i
JOIN cost_models m ON m.tenant_id = i.tenant_id AND m.project_id = i.project_id AND m.model = i.model
CROSS JOIN LATERAL (VALUES ('agent', i.agent_id), ('tool', coalesce(i.tool_name, ''))) g(grouping, key)
GROUP BY 1, 2, 3, 4, 5, 6;

-- 00006's conversations_tombstones is the same index as 00009's conversations_deleted.
DROP INDEX conversations_deleted;

-- The rate limiter's buckets write no WAL: each check locked and updated three rows,
-- some 440 bytes of WAL (and a full page after each checkpoint) for values that are
-- worth nothing after a crash. An unlogged table is emptied by crash recovery and is
-- empty on a promoted standby: every bucket is full then, as when idle for a minute
-- (docs/rate-limits.md).
ALTER TABLE rate_limit_buckets SET UNLOGGED;

-- +goose Down
ALTER TABLE rate_limit_buckets SET LOGGED;
CREATE INDEX conversations_deleted
    ON conversations (tenant_id, project_id, conversation_id) WHERE deleted_at_ms IS NOT NULL;
DROP TRIGGER cost_usage_update ON model_invocations;
DROP TRIGGER cost_usage_truncate ON model_invocations;
DROP TRIGGER cost_usage_delete ON model_invocations;
DROP TRIGGER cost_usage_insert ON model_invocations;
DROP FUNCTION cost_usage_refuse_update();
DROP FUNCTION cost_usage_clear();
DROP FUNCTION cost_usage_subtract();
DROP FUNCTION cost_usage_add();
DROP FUNCTION cost_usage_shard(text);
DROP TABLE cost_usage_conversations;
DROP TABLE cost_usage;
DROP TABLE cost_models;
