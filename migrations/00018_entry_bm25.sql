-- +goose Up
-- The text half of recall ranks by Okapi BM25 (docs/entries.md, "The text half"). An
-- entry's document (search) holds its words stemmed as Postgres's english
-- configuration stems them, stop words left out, unsegmented scripts as bigrams, every
-- lexeme prefixed by the scope's tag; search_length is the number of terms it holds
-- (the entry's length for BM25).
ALTER TABLE context_entries ADD COLUMN search_length integer NOT NULL DEFAULT 0;

-- The documents written so far held unstemmed words: each lexeme is stemmed here by the
-- same dictionary (english_stem: Snowball english and the english stop words), which
-- the service's stemmer matches (adapters/postgres/textsearch.go). Positions are kept.
UPDATE context_entries e SET (search, search_length) = (
    SELECT coalesce(string_agg(format('''%s'':%s', replace(replace(d.lexeme, '\', '\\'), '''', ''''''), d.positions), ' ')::tsvector,
                    ''::tsvector),
           coalesce(sum(d.n), 0)
    FROM (
        SELECT left(u.lexeme, 13) || s.stem AS lexeme, string_agg(p::text, ',' ORDER BY p) AS positions, count(*) AS n
        FROM unnest(e.search) AS u(lexeme, positions, weights)
        CROSS JOIN LATERAL (SELECT (ts_lexize('english_stem', substr(u.lexeme, 14)))[1] AS stem) s
        CROSS JOIN LATERAL (SELECT DISTINCT p FROM unnest(u.positions) AS p) pos
        WHERE s.stem IS NOT NULL
        GROUP BY 1
    ) d);

-- The statistics BM25 needs, per scope: how many recallable (active) entries it holds
-- and their total length (entry_text_stats), and in how many of them each term occurs
-- (entry_text_terms, the term without the scope's tag). The triggers below keep them in
-- the statement that changes the entries, whatever writes them (creates, transitions,
-- imports, reindexing, deletion). Rows are split into 16 shards, one per transaction
-- (its ID modulo 16), so that concurrent writers of one scope seldom wait for each
-- other; a transaction locks its shard's scope row before any term row, so writers of
-- one shard queue there instead of deadlocking over term rows. Readers sum the shards.
CREATE TABLE entry_text_stats (
    tenant_id   text     NOT NULL,
    project_id  text     NOT NULL,
    shard       smallint NOT NULL,
    docs        bigint   NOT NULL,
    length      bigint   NOT NULL,
    PRIMARY KEY (tenant_id, project_id, shard)
);
CREATE TABLE entry_text_terms (
    tenant_id   text     NOT NULL,
    project_id  text     NOT NULL,
    term        text     NOT NULL,
    shard       smallint NOT NULL,
    docs        bigint   NOT NULL,
    PRIMARY KEY (tenant_id, project_id, term, shard)
);

-- +goose StatementBegin
CREATE FUNCTION entry_text_stats_add(d_tenant text[], d_project text[], d_sign integer[], d_search tsvector[], d_length integer[])
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
-- +goose StatementEnd

CREATE TRIGGER entry_text_stats_insert AFTER INSERT ON context_entries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_stats_insert();
CREATE TRIGGER entry_text_stats_delete AFTER DELETE ON context_entries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_stats_delete();
CREATE TRIGGER entry_text_stats_update AFTER UPDATE ON context_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_stats_update();

INSERT INTO entry_text_stats (tenant_id, project_id, shard, docs, length)
SELECT tenant_id, project_id, 0, count(*), sum(search_length)
FROM context_entries WHERE status = 'active' GROUP BY 1, 2;
INSERT INTO entry_text_terms (tenant_id, project_id, term, shard, docs)
SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), 0, count(*)
FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights)
WHERE e.status = 'active' GROUP BY 1, 2, 3;

-- The text half also serves recall as of an instant, over entries that were active
-- then and may not be now: the index covers every status, and the query filters.
DROP INDEX context_entries_search;
CREATE INDEX context_entries_search ON context_entries USING gin (search);

-- +goose Down
DROP INDEX context_entries_search;
CREATE INDEX context_entries_search ON context_entries USING gin (search) WHERE status = 'active';
DROP TRIGGER entry_text_stats_update ON context_entries;
DROP TRIGGER entry_text_stats_delete ON context_entries;
DROP TRIGGER entry_text_stats_insert ON context_entries;
DROP FUNCTION entry_text_stats_update();
DROP FUNCTION entry_text_stats_delete();
DROP FUNCTION entry_text_stats_insert();
DROP FUNCTION entry_text_stats_add(text[], text[], integer[], tsvector[], integer[]);
DROP TABLE entry_text_terms;
DROP TABLE entry_text_stats;
ALTER TABLE context_entries DROP COLUMN search_length;
