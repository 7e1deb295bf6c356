-- +goose Up
-- A worker claims the oldest rows of a scope's backlog in (created_at_ms, entry_id)
-- order. The index gave created_at_ms alone, so a burst written at one instant (an
-- import, a batch) was sorted whole on every claim: 10,000 rows read and sorted to
-- take 64. With entry_id in the index the claim reads about as many rows as it takes.
CREATE INDEX entry_projection_queue_by_order
    ON entry_projection_queue (tenant_id, project_id, created_at_ms, entry_id);
DROP INDEX entry_projection_queue_by_created;

-- +goose Down
CREATE INDEX entry_projection_queue_by_created
    ON entry_projection_queue (tenant_id, project_id, created_at_ms);
DROP INDEX entry_projection_queue_by_order;
