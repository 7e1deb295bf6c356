-- +goose Up
-- The HNSW graph of a vector table indexes its vectors as halfvec (docs/entries.md,
-- "Tables"): half the pages of a graph of full vectors, at the same recall against an
-- exact scan. Recall orders the graph's candidates by their halfvec distance and
-- returns them by the column's own. The tables of models up to 2,000 dimensions (a
-- vector column) get a graph over the cast, built beside the old one, which then gives
-- way to it: on a large table this takes about as long as building the index did, the
-- table's writes wait for it, and recall keeps reading the old graph until the swap.
-- Replicas of the release before search by the full vectors, which no graph orders any
-- more: they rank their scopes exactly, correct but slower, until they are replaced
-- (docs/deploy.md, "Releases and migrations"). Tables of 2,001 to 4,000 dimensions
-- already store halfvec and keep their graph.
-- +goose StatementBegin
DO $$
DECLARE
    t text;
    d int;
BEGIN
    FOR t, d IN SELECT table_name, dimensions FROM vector_models WHERE dimensions <= 2000 ORDER BY table_name LOOP
        IF to_regclass(t || '_hnsw') IS NOT NULL THEN
            EXECUTE format('CREATE INDEX %I ON %I USING hnsw ((embedding::halfvec(%s)) halfvec_cosine_ops)
                WITH (m = 16, ef_construction = 200) WHERE indexed', t || '_hnsw_halfvec', t, d);
            EXECUTE format('DROP INDEX %I', t || '_hnsw');
            EXECUTE format('ALTER INDEX %I RENAME TO %I', t || '_hnsw_halfvec', t || '_hnsw');
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT table_name FROM vector_models WHERE dimensions <= 2000 ORDER BY table_name LOOP
        IF to_regclass(t || '_hnsw') IS NOT NULL THEN
            EXECUTE format('CREATE INDEX %I ON %I USING hnsw (embedding vector_cosine_ops)
                WITH (m = 16, ef_construction = 200) WHERE indexed', t || '_hnsw_vector', t);
            EXECUTE format('DROP INDEX %I', t || '_hnsw');
            EXECUTE format('ALTER INDEX %I RENAME TO %I', t || '_hnsw_vector', t || '_hnsw');
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd
