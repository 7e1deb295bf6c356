-- +goose Up
-- The text half of recall reads a common term's postings by impact instead of in full
-- (docs/entries.md, "Cost"): a posting's contribution to its entry's score grows with
-- tf and falls as the document's length grows, so "contribution at least τ" is, for
-- each tf, a range of lengths, and among postings of equal tf and length (equal
-- contributions) the newest come first, as recall breaks ties. The postings carry
-- their entry's creation time for that order.
ALTER TABLE entry_text_postings ADD COLUMN created_at_ms bigint;
UPDATE entry_text_postings p SET created_at_ms = e.created_at_ms
FROM context_entries e
WHERE e.tenant_id = p.tenant_id AND e.project_id = p.project_id AND e.entry_id = p.entry_id;
ALTER TABLE entry_text_postings ALTER COLUMN created_at_ms SET NOT NULL;
CREATE INDEX entry_text_postings_by_impact
    ON entry_text_postings (tenant_id, project_id, term, tf DESC, length, created_at_ms DESC, entry_id);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION entry_text_postings_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length, created_at_ms)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.entry_id, coalesce(cardinality(l.positions), 0), n.search_length,
           n.created_at_ms
    FROM new_rows n CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION entry_text_postings_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM entry_text_postings p
    USING old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
    CROSS JOIN LATERAL unnest(o.search) AS l(lexeme, positions, weights)
    WHERE (n.search <> o.search OR n.search_length <> o.search_length OR n.created_at_ms <> o.created_at_ms)
      AND p.tenant_id = o.tenant_id AND p.project_id = o.project_id
      AND p.term = substr(l.lexeme, 14) COLLATE "C" AND p.entry_id = o.entry_id;
    INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length, created_at_ms)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.entry_id, coalesce(cardinality(l.positions), 0), n.search_length,
           n.created_at_ms
    FROM old_rows o JOIN new_rows n USING (tenant_id, project_id, entry_id)
    CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights)
    WHERE n.search <> o.search OR n.search_length <> o.search_length OR n.created_at_ms <> o.created_at_ms;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION entry_text_postings_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.entry_id, coalesce(cardinality(l.positions), 0), n.search_length
    FROM new_rows n CROSS JOIN LATERAL unnest(n.search) AS l(lexeme, positions, weights);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION entry_text_postings_update() RETURNS trigger LANGUAGE plpgsql AS $$
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
DROP INDEX entry_text_postings_by_impact;
ALTER TABLE entry_text_postings DROP COLUMN created_at_ms;
