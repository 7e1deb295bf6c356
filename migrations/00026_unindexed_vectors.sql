-- +goose Up
-- Vectors become recallable when they are stored, not when they are in the HNSW graph
-- (docs/entries.md, "Recallable"): a vector table's rows land with indexed = false, out
-- of the graph, whose index becomes partial (WHERE indexed), and recall searches them
-- exactly beside the graph; a fold of the projection job sets indexed in batches, which
-- inserts them into the graph. The vector tables are created at runtime, one per model
-- listed in vector_models: each gets the column (its rows so far are all in the graph),
-- its HNSW index again as a partial one (rebuilt: on a large table this migration takes
-- about as long as building the index did), and the index that finds a scope's rows
-- outside the graph.
-- +goose StatementBegin
DO $$
DECLARE
    t   text;
    def text;
BEGIN
    FOR t IN SELECT table_name FROM vector_models ORDER BY table_name LOOP
        EXECUTE format('ALTER TABLE %I ADD COLUMN indexed boolean NOT NULL DEFAULT true', t);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN indexed SET DEFAULT false', t);
        SELECT pg_get_indexdef(i.indexrelid) INTO def
        FROM pg_index i
        WHERE i.indrelid = t::regclass AND i.indexrelid = to_regclass(t || '_hnsw');
        IF def IS NOT NULL THEN
            EXECUTE format('DROP INDEX %I', t || '_hnsw');
            EXECUTE def || ' WHERE indexed';
        END IF;
        EXECUTE format('CREATE INDEX %I ON %I (tenant_id, project_id, generation, entry_id) WHERE NOT indexed',
            t || '_unindexed', t);
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t   text;
    def text;
BEGIN
    FOR t IN SELECT table_name FROM vector_models ORDER BY table_name LOOP
        EXECUTE format('DROP INDEX %I', t || '_unindexed');
        SELECT pg_get_indexdef(i.indexrelid) INTO def
        FROM pg_index i
        WHERE i.indrelid = t::regclass AND i.indexrelid = to_regclass(t || '_hnsw');
        IF def IS NOT NULL THEN
            EXECUTE format('DROP INDEX %I', t || '_hnsw');
            EXECUTE regexp_replace(def, ' WHERE indexed$', '');
        END IF;
        EXECUTE format('ALTER TABLE %I DROP COLUMN indexed', t);
    END LOOP;
END $$;
-- +goose StatementEnd
