-- +goose Up
-- The text half of recall scores entries from their postings instead of their
-- documents (docs/entries.md, "The text half"): one row per term of an entry's
-- document (the term without the scope's tag), with how often the document holds it
-- (tf, its positions) and the document's length (search_length). A recall reads the
-- postings of its terms by term, through the primary key, and never unnests a
-- document. Every entry has its postings whatever its status, so recall as of an
-- instant, over entries that were active then, reads them too; the status and the
-- filters are checked on context_entries for the few candidates that can rank.
-- The term is compared in C collation so that a prefix term (a lone character of an
-- unsegmented script) is a range of the key.
CREATE TABLE entry_text_postings (
    tenant_id   text    NOT NULL,
    project_id  text    NOT NULL,
    term        text    COLLATE "C" NOT NULL,
    entry_id    text    NOT NULL,
    tf          integer NOT NULL,
    length      integer NOT NULL,
    PRIMARY KEY (tenant_id, project_id, term, entry_id) INCLUDE (tf, length)
);

-- The triggers below keep the postings in the statement that changes the entries,
-- whatever writes them (creates, corrections, merges, expiry, purges, imports,
-- reindexing, the deletion of a conversation). An entry's postings are its own rows:
-- two transactions meet on them only when they change the same entry, which its row
-- in context_entries already serializes, so they add no lock to the order of the
-- statistics' shards (migration 00018). An update replaces the postings of the
-- entries whose document or length changed; a change of status leaves them.
-- +goose StatementBegin
CREATE FUNCTION entry_text_postings_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.entry_id, coalesce(cardinality(l.positions), 0), n.search_length
    FROM new_rows n CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights);
    RETURN NULL;
END $$;

CREATE FUNCTION entry_text_postings_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM entry_text_postings p
    USING old_rows o CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
    WHERE p.tenant_id = o.tenant_id AND p.project_id = o.project_id
      AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.entry_id = o.entry_id;
    RETURN NULL;
END $$;

CREATE FUNCTION entry_text_postings_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM entry_text_postings p
    USING old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
    CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
    WHERE (n.search <> o.search OR n.search_length <> o.search_length)
      AND p.tenant_id = o.tenant_id AND p.project_id = o.project_id
      AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.entry_id = o.entry_id;
    INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.entry_id, coalesce(cardinality(l.positions), 0), n.search_length
    FROM old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
    CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights)
    WHERE n.search <> o.search OR n.search_length <> o.search_length;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER entry_text_postings_insert AFTER INSERT ON context_entries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_insert();
CREATE TRIGGER entry_text_postings_delete AFTER DELETE ON context_entries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_delete();
CREATE TRIGGER entry_text_postings_update AFTER UPDATE ON context_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_update();

INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length)
SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), e.entry_id, coalesce(cardinality(l.positions), 0), e.search_length
FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights);

-- Recall no longer searches the documents through their GIN index (a result's coverage
-- tests its own document), so entry writes stop paying for it.
DROP INDEX context_entries_search;

-- +goose Down
CREATE INDEX context_entries_search ON context_entries USING gin (search);
DROP TRIGGER entry_text_postings_update ON context_entries;
DROP TRIGGER entry_text_postings_delete ON context_entries;
DROP TRIGGER entry_text_postings_insert ON context_entries;
DROP FUNCTION entry_text_postings_update();
DROP FUNCTION entry_text_postings_delete();
DROP FUNCTION entry_text_postings_insert();
DROP TABLE entry_text_postings;
