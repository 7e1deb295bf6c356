-- +goose Up
-- A term no active entry holds any more keeps no row in entry_text_terms: a deleted
-- entry's rare words (a name, a code, a pasted password) must not stay in the
-- vocabulary at a count of zero (docs/entries.md, "The text half"). The statistics
-- are split into shards, so a term's count is the sum of its shards' rows, and a
-- decrement written in one shard may bring to zero a term counted in another: a term
-- whose rows sum to zero loses them all, in the statement that decremented it.
--
-- Two transactions taking a term's last holders at once, in different shards, would
-- each see the other's decrement missing and keep the rows; so a statement that
-- decrements a scope's terms first takes the scope's terms lock (an advisory lock
-- held to the end of the transaction), after its own shard's rows: a writer waiting
-- for it holds no row its holder needs, since the holder locks other shards' rows
-- only without waiting (SKIP LOCKED). A term with a row locked by another writer is
-- left to that writer: it either adds to the term or, decrementing it, removes the
-- rows once it holds the lock and sees this transaction's rows committed. Writers
-- that only add (creates, imports) take no lock and queue as before.

-- The counting itself is unchanged: the function that did it is kept under another
-- name, and entry_text_stats_add (which the triggers call) counts, then cleans.
ALTER FUNCTION entry_text_stats_add(text[], text[], integer[], tsvector[], integer[]) RENAME TO entry_text_stats_count;

-- +goose StatementBegin
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
-- +goose StatementEnd

-- The rows already at zero go now.
DELETE FROM entry_text_terms t USING (
    SELECT tenant_id, project_id, term FROM entry_text_terms GROUP BY 1, 2, 3 HAVING sum(docs) = 0
) z
WHERE t.tenant_id = z.tenant_id AND t.project_id = z.project_id AND t.term = z.term;

-- +goose Down
DROP FUNCTION entry_text_stats_add(text[], text[], integer[], tsvector[], integer[]);
ALTER FUNCTION entry_text_stats_count(text[], text[], integer[], tsvector[], integer[]) RENAME TO entry_text_stats_add;
