-- +goose Up
-- No statement reads model invocations by agent, tool or model any more: the cost
-- report reads the running sums (migration 00012) or, over a range, the time index
-- that holds every column it needs (00009). Each of these indexes cost every save an
-- index insertion and a bulk load its build.
DROP INDEX model_invocations_by_agent;
DROP INDEX model_invocations_by_tool;
DROP INDEX model_invocations_by_model;

-- +goose Down
CREATE INDEX model_invocations_by_agent
    ON model_invocations (tenant_id, project_id, agent_id, started_at_ms);
CREATE INDEX model_invocations_by_tool
    ON model_invocations (tenant_id, project_id, tool_name, started_at_ms);
CREATE INDEX model_invocations_by_model
    ON model_invocations (tenant_id, project_id, model, started_at_ms);
