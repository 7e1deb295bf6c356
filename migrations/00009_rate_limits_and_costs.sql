-- +goose Up
-- rate_limit_buckets holds the token buckets of the postgres rate limiter (docs/rate-limits.md),
-- shared by every replica. A bucket is one level's budget for one key: global (tenant
-- and name empty), agent (tenant, subject) or tool (tenant, route). It is split into
-- 1–16 shard rows, each holding its share of the tokens, so that concurrent checks lock
-- different rows (docs/rate-limits.md). tokens counts fixed-point units
-- (runtime.RateUnitsPerToken to a token) as they stood at at_us (µs since the epoch);
-- a check computes the refill since then.
--
-- Every check updates a row, so the table is built for HOT updates: no index on the
-- columns a check changes, and half of every page left free for the new versions. Rows
-- untouched for a minute are full again, the same as absent ones, and are swept.
CREATE TABLE rate_limit_buckets (
    tenant_id  text     NOT NULL,
    level      text     NOT NULL CHECK (level IN ('global', 'agent', 'tool')),
    name       text     NOT NULL,
    shard      smallint NOT NULL CHECK (shard >= 0 AND shard < 16),
    tokens     bigint   NOT NULL CHECK (tokens >= 0),
    at_us      bigint   NOT NULL,
    PRIMARY KEY (tenant_id, level, name, shard)
) WITH (fillfactor = 50);

-- Cost attribution reads every invocation of a scope in a startedAtMs range and
-- groups it by agent, tool, model or conversation: this index holds every column it
-- reads, so the report is an index-only scan.
DROP INDEX model_invocations_by_time;
CREATE INDEX model_invocations_by_time
    ON model_invocations (tenant_id, project_id, started_at_ms)
    INCLUDE (agent_id, tool_name, model, conversation_id, input_tokens, output_tokens, cached_tokens);

-- The report leaves out the invocations of deleted conversations, which wait for their
-- deletion job: few at any time, found through this index.
CREATE INDEX conversations_deleted
    ON conversations (tenant_id, project_id, conversation_id) WHERE deleted_at_ms IS NOT NULL;

-- +goose Down
DROP INDEX conversations_deleted;
DROP INDEX model_invocations_by_time;
CREATE INDEX model_invocations_by_time
    ON model_invocations (tenant_id, project_id, started_at_ms);
DROP TABLE rate_limit_buckets;
