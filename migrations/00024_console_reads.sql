-- +goose Up
-- Two reads of the operator console (docs/console.md), each a range of an index.

-- The overview's recent operations: the scope's newest first.
CREATE INDEX operations_by_created
    ON operations (tenant_id, project_id, created_at_ms DESC, operation_id);

-- A window's page lists the invocations that sent it, the latest started first. Without
-- this index that is a walk of all its conversation's invocations; with it, a range.
-- It costs each saved invocation one more index insertion.
CREATE INDEX model_invocations_by_window
    ON model_invocations (tenant_id, project_id, request_window_id, started_at_ms DESC, invocation_id);

-- +goose Down
DROP INDEX model_invocations_by_window;
DROP INDEX operations_by_created;
