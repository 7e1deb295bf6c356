-- +goose Up
-- The derived data of context_entries and model_invocations is kept by the service's
-- writes instead of triggers (docs/entries.md, "The text half"; docs/costs.md,
-- "Running sums"): Citus distributes no table with triggers (docs/deploy.md, "Running
-- on Citus"). The store that inserts, updates or deletes entries writes, in the same
-- transaction and in the order the triggers did, the BM25 statistics (migrations
-- 00018 and 00032), the postings (00029) and a new ordinal for a rewritten document;
-- the store that saves invocations, and the deletion of a conversation, write the
-- cost sums (00012, 00016). The data is the same: nothing is recounted here. The
-- functions the statements still call stay: entry_text_pack_lock, cost_usage_shard
-- and cost_usage_hour.
--
-- An update of an invocation is no longer refused by the database: no statement of
-- the service updates one, and a truncate of model_invocations no longer empties the
-- sums (none runs one). A write past the stores (SQL or COPY by hand) keeps nothing.
--
-- Not backward compatible (docs/deploy.md, "Releases and migrations"): a replica of
-- the release before, still writing after this migration, leaves its writes out of
-- the index and the sums.
DROP TRIGGER context_entries_text_ord ON context_entries;
DROP TRIGGER entry_text_postings_insert ON context_entries;
DROP TRIGGER entry_text_postings_delete ON context_entries;
DROP TRIGGER entry_text_postings_update ON context_entries;
DROP TRIGGER entry_text_stats_insert ON context_entries;
DROP TRIGGER entry_text_stats_delete ON context_entries;
DROP TRIGGER entry_text_stats_update ON context_entries;
DROP FUNCTION context_entries_text_ord();
DROP FUNCTION entry_text_postings_insert();
DROP FUNCTION entry_text_postings_delete();
DROP FUNCTION entry_text_postings_update();
DROP FUNCTION entry_text_stats_insert();
DROP FUNCTION entry_text_stats_delete();
DROP FUNCTION entry_text_stats_update();
DROP FUNCTION entry_text_stats_add(text[], text[], integer[], tsvector[], integer[]);
DROP FUNCTION entry_text_stats_count(text[], text[], integer[], tsvector[], integer[]);

DROP TRIGGER cost_usage_insert ON model_invocations;
DROP TRIGGER cost_usage_delete ON model_invocations;
DROP TRIGGER cost_usage_truncate ON model_invocations;
DROP TRIGGER cost_usage_update ON model_invocations;
DROP FUNCTION cost_usage_add();
DROP FUNCTION cost_usage_subtract();
DROP FUNCTION cost_usage_clear();
DROP FUNCTION cost_usage_refuse_update();

-- The document number's unique index over the number alone stays: Citus accepts no
-- unique index without the distribution column, so `migrate up` replaces it on a
-- Citus coordinator only, by one unique within the scope (Migrator.Distribute). On
-- plain Postgres the text half's plans lean on it: without it, recall in text mode
-- took 2.6 times as long on a LoCoMo conversation (docs/benchmarks.md).

-- +goose Down

-- The triggers and their functions as migrations 00012, 00016, 00018, 00029 and 00032
-- left them. A table Citus distributed in the meantime refuses them.
-- +goose StatementBegin
CREATE FUNCTION entry_text_stats_count(d_tenant text[], d_project text[], d_sign integer[], d_search tsvector[], d_length integer[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    s smallint := (txid_current() % 16)::smallint;
BEGIN
    INSERT INTO entry_text_stats AS t (tenant_id, project_id, shard, docs, length)
    SELECT d.tenant_id, d.project_id, s, sum(d.sign), sum(d.sign::bigint * d.length)
    FROM unnest(d_tenant, d_project, d_sign, d_length) AS d(tenant_id, project_id, sign, length)
    GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (tenant_id, project_id, shard) DO UPDATE
    SET docs = t.docs + excluded.docs, length = t.length + excluded.length;

    INSERT INTO entry_text_terms AS t (tenant_id, project_id, term, shard, docs)
    SELECT d.tenant_id, d.project_id, substr(l.lexeme, 14), s, sum(d.sign)
    FROM unnest(d_tenant, d_project, d_sign, d_search) AS d(tenant_id, project_id, sign, search)
    CROSS JOIN LATERAL unnest(d.search) AS l(lexeme, positions, weights)
    GROUP BY 1, 2, 3 HAVING sum(d.sign) <> 0 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, project_id, term, shard) DO UPDATE SET docs = t.docs + excluded.docs;
END $$;

CREATE FUNCTION entry_text_stats_add(d_tenant text[], d_project text[], d_sign integer[], d_search tsvector[], d_length integer[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM entry_text_stats_count(d_tenant, d_project, d_sign, d_search, d_length);
    IF NOT (-1 = ANY(d_sign)) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(g.tenant_id || '/' || g.project_id, 7462))
    FROM (SELECT DISTINCT d.tenant_id, d.project_id
          FROM unnest(d_tenant, d_project, d_sign) AS d(tenant_id, project_id, sign)
          WHERE d.sign < 0 ORDER BY 1, 2) g;

    -- The terms decremented whose shards sum to zero are read through the primary
    -- key; their rows are locked (those another writer holds are skipped) and removed
    -- when every row of the term was locked and the locked rows still sum to zero.
    WITH decremented AS (
        SELECT d.tenant_id, d.project_id, substr(l.lexeme, 14) AS term
        FROM unnest(d_tenant, d_project, d_sign, d_search) AS d(tenant_id, project_id, sign, search)
        CROSS JOIN LATERAL unnest(d.search) AS l(lexeme, positions, weights)
        GROUP BY 1, 2, 3 HAVING sum(d.sign) < 0
    ), zero AS (
        SELECT x.tenant_id, x.project_id, x.term, count(*) AS shards
        FROM decremented x
        JOIN entry_text_terms t ON t.tenant_id = x.tenant_id AND t.project_id = x.project_id AND t.term = x.term
        GROUP BY 1, 2, 3 HAVING sum(t.docs) = 0
    ), locked AS (
        SELECT t.tenant_id, t.project_id, t.term, t.docs, z.shards
        FROM zero z
        JOIN entry_text_terms t ON t.tenant_id = z.tenant_id AND t.project_id = z.project_id AND t.term = z.term
        ORDER BY t.tenant_id, t.project_id, t.term, t.shard
        FOR UPDATE OF t SKIP LOCKED
    ), gone AS (
        SELECT tenant_id, project_id, term FROM locked
        GROUP BY 1, 2, 3 HAVING sum(docs) = 0 AND count(*) = min(shards)
    )
    DELETE FROM entry_text_terms t USING gone g
    WHERE t.tenant_id = g.tenant_id AND t.project_id = g.project_id AND t.term = g.term;
END $$;

CREATE FUNCTION entry_text_stats_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM entry_text_stats_add(array_agg(tenant_id), array_agg(project_id), array_agg(1), array_agg(search), array_agg(search_length))
    FROM new_rows WHERE status = 'active'
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE FUNCTION entry_text_stats_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM entry_text_stats_add(array_agg(tenant_id), array_agg(project_id), array_agg(-1), array_agg(search), array_agg(search_length))
    FROM old_rows WHERE status = 'active'
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

-- An update counts only where it changed whether the entry is active, or its document.
CREATE FUNCTION entry_text_stats_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM entry_text_stats_add(array_agg(d.tenant_id), array_agg(d.project_id), array_agg(d.sign), array_agg(d.search), array_agg(d.search_length))
    FROM (
        SELECT o.tenant_id, o.project_id, -1 AS sign, o.search, o.search_length
        FROM old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
        WHERE o.status = 'active' AND (n.status <> 'active' OR n.search <> o.search)
        UNION ALL
        SELECT n.tenant_id, n.project_id, 1, n.search, n.search_length
        FROM old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
        WHERE n.status = 'active' AND (o.status <> 'active' OR n.search <> o.search)
    ) d
    HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE FUNCTION context_entries_text_ord() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.text_ord := nextval('entry_text_ords');
    RETURN NEW;
END $$;

CREATE FUNCTION entry_text_postings_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entry_text_postings (tenant_id, project_id, term, ord, tf, length, created_at_ms)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.text_ord, coalesce(cardinality(l.positions), 0),
           n.search_length, n.created_at_ms
    FROM new_rows n CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights);
    RETURN NULL;
END $$;

CREATE FUNCTION entry_text_postings_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(entry_text_pack_lock(g.tenant_id, g.project_id))
    FROM (SELECT DISTINCT o.tenant_id, o.project_id FROM old_rows o ORDER BY 1, 2) g;
    INSERT INTO entry_text_dropped (tenant_id, project_id, term, ord)
    SELECT o.tenant_id, o.project_id, substr(l.lexeme, 14), o.text_ord
    FROM old_rows o CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
    WHERE NOT EXISTS (SELECT 1 FROM entry_text_postings p
                      WHERE p.tenant_id = o.tenant_id AND p.project_id = o.project_id
                        AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.ord = o.text_ord)
    ON CONFLICT DO NOTHING;
    DELETE FROM entry_text_postings p
    USING old_rows o CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
    WHERE p.tenant_id = o.tenant_id AND p.project_id = o.project_id
      AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.ord = o.text_ord;
    RETURN NULL;
END $$;

CREATE FUNCTION entry_text_postings_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(entry_text_pack_lock(g.tenant_id, g.project_id))
    FROM (SELECT DISTINCT o.tenant_id, o.project_id
          FROM old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
          WHERE n.text_ord <> o.text_ord ORDER BY 1, 2) g;
    INSERT INTO entry_text_dropped (tenant_id, project_id, term, ord)
    SELECT o.tenant_id, o.project_id, substr(l.lexeme, 14), o.text_ord
    FROM old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
    CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
    WHERE n.text_ord <> o.text_ord
      AND NOT EXISTS (SELECT 1 FROM entry_text_postings p
                      WHERE p.tenant_id = o.tenant_id AND p.project_id = o.project_id
                        AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.ord = o.text_ord)
    ON CONFLICT DO NOTHING;
    DELETE FROM entry_text_postings p
    USING old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
    CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
    WHERE n.text_ord <> o.text_ord
      AND p.tenant_id = o.tenant_id AND p.project_id = o.project_id
      AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.ord = o.text_ord;
    INSERT INTO entry_text_postings (tenant_id, project_id, term, ord, tf, length, created_at_ms)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.text_ord, coalesce(cardinality(l.positions), 0),
           n.search_length, n.created_at_ms
    FROM old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
    CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights)
    WHERE n.text_ord <> o.text_ord;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER entry_text_stats_insert AFTER INSERT ON context_entries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_stats_insert();
CREATE TRIGGER entry_text_stats_delete AFTER DELETE ON context_entries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_stats_delete();
CREATE TRIGGER entry_text_stats_update AFTER UPDATE ON context_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_stats_update();
CREATE TRIGGER context_entries_text_ord BEFORE UPDATE ON context_entries FOR EACH ROW
    WHEN (NEW.search IS DISTINCT FROM OLD.search OR NEW.search_length IS DISTINCT FROM OLD.search_length
          OR NEW.created_at_ms IS DISTINCT FROM OLD.created_at_ms)
    EXECUTE FUNCTION context_entries_text_ord();
CREATE TRIGGER entry_text_postings_insert AFTER INSERT ON context_entries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_insert();
CREATE TRIGGER entry_text_postings_delete AFTER DELETE ON context_entries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_delete();
CREATE TRIGGER entry_text_postings_update AFTER UPDATE ON context_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_update();

-- +goose StatementBegin
CREATE FUNCTION cost_usage_add() RETURNS trigger LANGUAGE plpgsql
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
