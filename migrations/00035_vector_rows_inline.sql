-- +goose Up
-- A vector table keeps its vectors in their rows: toast_tuple_target at the largest
-- value Postgres accepts (a page), so that a row is toasted only when it does not fit
-- one (docs/entries.md, "Tables"). At the default (2 KiB) a 512-dimension vector went
-- out of line, and ranking a scope exactly read every vector back through the TOAST
-- table's index. The service creates new tables so (vectorToastTarget); this sets the
-- tables of the models before. It changes no row: rows already stored stay as they are
-- until written again (a rebuild of the projection writes every row anew).
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT table_name FROM vector_models ORDER BY table_name LOOP
        EXECUTE format('ALTER TABLE %I SET (toast_tuple_target = 8160)', t);
    END LOOP;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT table_name FROM vector_models ORDER BY table_name LOOP
        EXECUTE format('ALTER TABLE %I RESET (toast_tuple_target)', t);
    END LOOP;
END $$;
-- +goose StatementEnd
