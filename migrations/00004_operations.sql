-- +goose Up
-- operations records background work (conversation deletion, retention, and later
-- exports, imports and rebuilds) so that callers can follow it and so that it survives
-- a restart. A row holds IDs, counts and times, never content: request is the normalized
-- request echo and cursor the job's resume point (a conversation ID and a sequence).
-- A job step updates the row in the same transaction as the work it did, so progress
-- is exact even when a job is interrupted and run again.
CREATE TABLE operations (
    tenant_id        text    NOT NULL,
    project_id       text    NOT NULL,
    operation_id     text    NOT NULL,
    kind             text    NOT NULL CHECK (kind IN ('conversation_delete', 'retention', 'export', 'import', 'vector_rebuild', 'advanced')),
    state            text    NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'failed')),
    -- The conversation a conversation_delete removes.
    conversation_id  text,
    request          jsonb   NOT NULL,
    result           jsonb,
    error_code       text,
    error_message    text,
    progress_done    bigint  NOT NULL DEFAULT 0 CHECK (progress_done >= 0),
    progress_total   bigint  CHECK (progress_total >= 0),
    cursor           jsonb,
    -- A retention run that the configured default policy started, not a caller.
    default_policy   boolean NOT NULL DEFAULT false,
    dry_run          boolean NOT NULL DEFAULT false,
    created_at_ms    bigint  NOT NULL,
    updated_at_ms    bigint  NOT NULL,
    started_at_ms    bigint,
    completed_at_ms  bigint,
    PRIMARY KEY (tenant_id, project_id, operation_id),
    CHECK ((kind = 'conversation_delete') = (conversation_id IS NOT NULL)),
    CHECK ((state = 'failed') = (error_code IS NOT NULL AND error_message IS NOT NULL)),
    CHECK ((state IN ('succeeded', 'failed')) = (completed_at_ms IS NOT NULL))
);

-- A conversation has at most one deletion operation: deleting it again returns it.
CREATE UNIQUE INDEX operations_conversation_delete
    ON operations (tenant_id, project_id, conversation_id) WHERE kind = 'conversation_delete';

-- Maintenance status: pending and running counts, recent failures.
CREATE INDEX operations_by_state
    ON operations (tenant_id, project_id, state, completed_at_ms);

-- Maintenance status: when retention last ran.
CREATE INDEX operations_retention_runs
    ON operations (tenant_id, project_id, completed_at_ms)
    WHERE kind = 'retention' AND state = 'succeeded' AND NOT dry_run;

-- The default retention policy's scheduler: one run per scope and period, none while
-- one is still in flight.
CREATE INDEX operations_default_retention
    ON operations (tenant_id, project_id, created_at_ms)
    WHERE kind = 'retention' AND default_policy;
CREATE INDEX operations_in_flight
    ON operations (tenant_id, project_id, kind) WHERE state IN ('pending', 'running');

-- River's schema (github.com/riverqueue/river, migration line "main", versions 1–8):
-- the job queue the operations run on. This is the state River's own migrations 001–008
-- leave behind, written as one step because goose runs a file in one transaction (the
-- originals add an enum value and use it in later versions, which Postgres refuses
-- within a single transaction). river_migration records the versions, so River's own
-- tooling sees them applied; TestRiverSchemaMatchesRiverMigrations compares this schema
-- with one built by rivermigrate and fails when an upgrade of River brings a version
-- this file lacks: add a goose migration with River's SQL for it then.
CREATE TABLE river_migration (
    line        text NOT NULL,
    version     bigint NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT line_length CHECK (char_length(line) > 0 AND char_length(line) < 128),
    CONSTRAINT version_gte_1 CHECK (version >= 1),
    -- Named as River's rebuild of the table (version 005) names it.
    CONSTRAINT river_migration_pkey1 PRIMARY KEY (line, version)
);
INSERT INTO river_migration (line, version) SELECT 'main', v FROM generate_series(1, 8) AS v;

CREATE TYPE river_job_state AS ENUM (
    'available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled'
);

CREATE TABLE river_job (
    id            bigserial PRIMARY KEY,
    state         river_job_state NOT NULL DEFAULT 'available',
    attempt       smallint NOT NULL DEFAULT 0,
    max_attempts  smallint NOT NULL DEFAULT 25,
    attempted_at  timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finalized_at  timestamptz,
    scheduled_at  timestamptz NOT NULL DEFAULT now(),
    priority      smallint NOT NULL DEFAULT 1,
    args          jsonb NOT NULL,
    attempted_by  text[],
    errors        jsonb[],
    kind          text NOT NULL,
    metadata      jsonb NOT NULL DEFAULT '{}',
    queue         text NOT NULL DEFAULT 'default',
    tags          varchar(255)[] NOT NULL DEFAULT '{}',
    unique_key    bytea,
    unique_states bit(8),
    CONSTRAINT finalized_or_finalized_at_null CHECK (
        (finalized_at IS NULL AND state NOT IN ('cancelled', 'completed', 'discarded')) OR
        (finalized_at IS NOT NULL AND state IN ('cancelled', 'completed', 'discarded'))
    ),
    CONSTRAINT max_attempts_is_positive CHECK (max_attempts > 0),
    CONSTRAINT priority_in_range CHECK (priority >= 1 AND priority <= 4),
    CONSTRAINT queue_length CHECK (char_length(queue) > 0 AND char_length(queue) < 128),
    CONSTRAINT kind_length CHECK (char_length(kind) > 0 AND char_length(kind) < 128)
);

CREATE INDEX river_job_kind ON river_job USING btree (kind);
CREATE INDEX river_job_state_and_finalized_at_index ON river_job USING btree (state, finalized_at) WHERE finalized_at IS NOT NULL;
CREATE INDEX river_job_prioritized_fetching_index ON river_job USING btree (state, queue, priority, scheduled_at, id);
CREATE INDEX river_job_args_index ON river_job USING gin (args);
CREATE INDEX river_job_metadata_index ON river_job USING gin (metadata);

-- +goose StatementBegin
CREATE FUNCTION river_job_state_in_bitmask(bitmask bit(8), state river_job_state)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
AS $$
    SELECT CASE state
        WHEN 'available' THEN get_bit(bitmask, 7)
        WHEN 'cancelled' THEN get_bit(bitmask, 6)
        WHEN 'completed' THEN get_bit(bitmask, 5)
        WHEN 'discarded' THEN get_bit(bitmask, 4)
        WHEN 'pending'   THEN get_bit(bitmask, 3)
        WHEN 'retryable' THEN get_bit(bitmask, 2)
        WHEN 'running'   THEN get_bit(bitmask, 1)
        WHEN 'scheduled' THEN get_bit(bitmask, 0)
        ELSE 0
    END = 1;
$$;
-- +goose StatementEnd

CREATE UNIQUE INDEX river_job_unique_idx ON river_job (unique_key)
    WHERE unique_key IS NOT NULL
      AND unique_states IS NOT NULL
      AND river_job_state_in_bitmask(unique_states, state);

CREATE UNLOGGED TABLE river_leader (
    elected_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    leader_id   text NOT NULL,
    name        text PRIMARY KEY DEFAULT 'default',
    CONSTRAINT name_length CHECK (name = 'default'),
    CONSTRAINT leader_id_length CHECK (char_length(leader_id) > 0 AND char_length(leader_id) < 128)
);

CREATE TABLE river_queue (
    name        text PRIMARY KEY NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    metadata    jsonb NOT NULL DEFAULT '{}'::jsonb,
    paused_at   timestamptz,
    updated_at  timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP
);

CREATE TABLE river_notification (
    id          bigserial PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    payload     text NOT NULL,
    topic       text NOT NULL,
    CONSTRAINT topic_length CHECK (length(topic) > 0 AND length(topic) < 128)
);
CREATE INDEX river_notification_created_at_idx ON river_notification (created_at);
CREATE INDEX river_notification_topic_id_idx ON river_notification (topic, id);

-- +goose Down
DROP TABLE river_notification;
DROP TABLE river_queue;
DROP TABLE river_leader;
DROP TABLE river_job;
DROP FUNCTION river_job_state_in_bitmask;
DROP TYPE river_job_state;
DROP TABLE river_migration;
DROP TABLE operations;
