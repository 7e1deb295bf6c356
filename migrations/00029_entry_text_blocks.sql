-- +goose Up
-- The text half of recall reads its terms' postings packed (docs/entries.md, "The
-- text half"): summing postings row by row in SQL cost a common term's every row,
-- and a 100,000-entry scope answered in 15–25 ms. A scope's postings now live in
-- blocks, one row per up to 8,192 postings of a term, which the service decodes and
-- scores itself, and the postings written since the last pack wait in
-- entry_text_postings, one row each, until the projection packs them.
--
-- A posting names its document by an ordinal, text_ord: a number from one sequence,
-- given to an entry when it is stored and again whenever its document, length or
-- creation time changes. A packed posting whose ordinal no entry carries any more is
-- dead (its entry was deleted or rewritten); recall skips it, and the next pack of
-- the scope removes it from its block (entry_text_dropped lists them).
CREATE SEQUENCE entry_text_ords AS bigint;
ALTER TABLE context_entries ADD COLUMN text_ord bigint NOT NULL DEFAULT nextval('entry_text_ords');
ALTER SEQUENCE entry_text_ords OWNED BY context_entries.text_ord;
CREATE UNIQUE INDEX context_entries_by_text_ord ON context_entries (text_ord);

-- +goose StatementBegin
CREATE FUNCTION context_entries_text_ord() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.text_ord := nextval('entry_text_ords');
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER context_entries_text_ord BEFORE UPDATE ON context_entries FOR EACH ROW
    WHEN (NEW.search IS DISTINCT FROM OLD.search OR NEW.search_length IS DISTINCT FROM OLD.search_length
          OR NEW.created_at_ms IS DISTINCT FROM OLD.created_at_ms)
    EXECUTE FUNCTION context_entries_text_ord();

DROP TRIGGER entry_text_postings_update ON context_entries;
DROP TRIGGER entry_text_postings_delete ON context_entries;
DROP TRIGGER entry_text_postings_insert ON context_entries;
DROP FUNCTION entry_text_postings_update();
DROP FUNCTION entry_text_postings_delete();
DROP FUNCTION entry_text_postings_insert();
DROP TABLE entry_text_postings;

-- The postings not packed yet: a row per term of a document, keyed by its ordinal.
CREATE TABLE entry_text_postings (
    tenant_id     text    NOT NULL,
    project_id    text    NOT NULL,
    term          text    COLLATE "C" NOT NULL,
    ord           bigint  NOT NULL,
    tf            integer NOT NULL,
    length        integer NOT NULL,
    created_at_ms bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, term, ord) INCLUDE (tf, length, created_at_ms)
);

-- The packed postings of a term, by block number: data holds postings sorted by
-- ordinal (the format is in adapters/postgres/textblocks.go), first_ord and last_ord
-- the least and greatest. It is stored uncompressed: the encoding leaves little to
-- compress, and recall reads every block of its terms.
CREATE TABLE entry_text_blocks (
    tenant_id  text    NOT NULL,
    project_id text    NOT NULL,
    term       text    COLLATE "C" NOT NULL,
    block      integer NOT NULL,
    first_ord  bigint  NOT NULL,
    last_ord   bigint  NOT NULL,
    postings   integer NOT NULL,
    data       bytea   NOT NULL,
    PRIMARY KEY (tenant_id, project_id, term, block)
);
ALTER TABLE entry_text_blocks ALTER COLUMN data SET STORAGE EXTERNAL;

-- Packed postings of documents that are gone, for the next pack to remove.
CREATE TABLE entry_text_dropped (
    tenant_id  text   NOT NULL,
    project_id text   NOT NULL,
    term       text   COLLATE "C" NOT NULL,
    ord        bigint NOT NULL,
    PRIMARY KEY (tenant_id, project_id, term, ord)
);

-- The triggers keep the postings in the statement that changes the entries, as
-- before. A document that goes (its entry deleted, or its document rewritten under a
-- new ordinal) loses its pending postings, and its packed ones are listed as dropped.
-- Whether a posting is still pending is read after the scope's pack lock is taken
-- (shared here, exclusive in a pack), so that a pack moving it into a block at the
-- same time cannot leave it there unlisted.
-- +goose StatementBegin
CREATE FUNCTION entry_text_pack_lock(tenant text, project text) RETURNS bigint LANGUAGE sql IMMUTABLE AS $$
    SELECT hashtextextended(tenant || '/' || project, 7461)
$$;

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

CREATE TRIGGER entry_text_postings_insert AFTER INSERT ON context_entries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_insert();
CREATE TRIGGER entry_text_postings_delete AFTER DELETE ON context_entries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_delete();
CREATE TRIGGER entry_text_postings_update AFTER UPDATE ON context_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_update();

-- Every entry's postings start pending; the projection's sweep finds the scopes that
-- hold more than a pack's threshold and packs them.
INSERT INTO entry_text_postings (tenant_id, project_id, term, ord, tf, length, created_at_ms)
SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), e.text_ord, coalesce(cardinality(l.positions), 0),
       e.search_length, e.created_at_ms
FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights);

-- +goose Down
DROP TRIGGER entry_text_postings_update ON context_entries;
DROP TRIGGER entry_text_postings_delete ON context_entries;
DROP TRIGGER entry_text_postings_insert ON context_entries;
DROP FUNCTION entry_text_postings_update();
DROP FUNCTION entry_text_postings_delete();
DROP FUNCTION entry_text_postings_insert();
DROP FUNCTION entry_text_pack_lock(text, text);
DROP TABLE entry_text_dropped;
DROP TABLE entry_text_blocks;
DROP TABLE entry_text_postings;
DROP TRIGGER context_entries_text_ord ON context_entries;
DROP FUNCTION context_entries_text_ord();
ALTER TABLE context_entries DROP COLUMN text_ord;

CREATE TABLE entry_text_postings (
    tenant_id     text    NOT NULL,
    project_id    text    NOT NULL,
    term          text    COLLATE "C" NOT NULL,
    entry_id      text    NOT NULL,
    tf            integer NOT NULL,
    length        integer NOT NULL,
    created_at_ms bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, term, entry_id) INCLUDE (tf, length)
);
CREATE INDEX entry_text_postings_by_impact
    ON entry_text_postings (tenant_id, project_id, term, tf DESC, length, created_at_ms DESC, entry_id);

-- +goose StatementBegin
CREATE FUNCTION entry_text_postings_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length, created_at_ms)
    SELECT n.tenant_id, n.project_id, substr(l.lexeme, 14), n.entry_id, coalesce(cardinality(l.positions), 0), n.search_length,
           n.created_at_ms
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

CREATE TRIGGER entry_text_postings_insert AFTER INSERT ON context_entries
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_insert();
CREATE TRIGGER entry_text_postings_delete AFTER DELETE ON context_entries
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_delete();
CREATE TRIGGER entry_text_postings_update AFTER UPDATE ON context_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION entry_text_postings_update();

INSERT INTO entry_text_postings (tenant_id, project_id, term, entry_id, tf, length, created_at_ms)
SELECT e.tenant_id, e.project_id, substr(l.lexeme, 14), e.entry_id, coalesce(cardinality(l.positions), 0), e.search_length,
       e.created_at_ms
FROM context_entries e CROSS JOIN LATERAL unnest(e.search) AS l(lexeme, positions, weights);
