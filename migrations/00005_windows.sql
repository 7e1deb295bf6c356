-- +goose Up
-- context_windows holds the header of every context window: the exact, ordered content
-- a model saw (docs/windows.md). Windows are immutable; item_count, content_bytes and
-- content_sha256 are computed once at create and never change. metadata is json (not
-- jsonb) so the client's compacted text comes back as sent.
CREATE TABLE context_windows (
    tenant_id        text    NOT NULL,
    project_id       text    NOT NULL,
    window_id        text    NOT NULL,
    conversation_id  text    NOT NULL,
    stage            text    NOT NULL CHECK (stage IN ('original', 'assembled', 'compressed')),
    purpose          text    NOT NULL,
    token_count      bigint  NOT NULL CHECK (token_count >= 0),
    item_count       integer NOT NULL CHECK (item_count BETWEEN 0 AND 2000),
    content_bytes    bigint  NOT NULL CHECK (content_bytes >= 0),
    content_sha256   text    NOT NULL,
    metadata         json,
    created_at_ms    bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, window_id)
);

-- Conversation deletion removes a conversation's windows.
CREATE INDEX context_windows_by_conversation
    ON context_windows (tenant_id, project_id, conversation_id);

-- context_window_items holds the items of a window in their own rows, written with one
-- COPY and read with one statement. content is bytea, not text: it is the exact bytes
-- the model saw, NUL characters included, which Postgres text cannot hold.
-- knowledge_evidence is the evidence object with all its members. conversation_id is
-- the window's, repeated so that deleting a conversation is a plain DELETE here too.
-- Item IDs are unique within a window; the service checks that before the write, so no
-- second index slows the COPY.
CREATE TABLE context_window_items (
    tenant_id           text    NOT NULL,
    project_id          text    NOT NULL,
    window_id           text    NOT NULL,
    ordinal             integer NOT NULL CHECK (ordinal >= 0),
    conversation_id     text    NOT NULL,
    item_id             text    NOT NULL,
    kind                text    NOT NULL,
    role                text,
    content             bytea   NOT NULL,
    source_record_id    text,
    knowledge_evidence  json,
    metadata            json,
    PRIMARY KEY (tenant_id, project_id, window_id, ordinal)
);

CREATE INDEX context_window_items_by_conversation
    ON context_window_items (tenant_id, project_id, conversation_id);

-- window_derivations holds the edges "target was built from source". The two windows
-- may belong to different conversations: conversation_id is the target's, and the
-- foreign keys remove an edge when either window is deleted with its conversation.
CREATE TABLE window_derivations (
    tenant_id           text   NOT NULL,
    project_id          text   NOT NULL,
    derivation_id       text   NOT NULL,
    conversation_id     text   NOT NULL,
    source_window_id    text   NOT NULL,
    target_window_id    text   NOT NULL,
    kind                text   NOT NULL CHECK (kind IN ('assemble', 'compress', 'trim', 'reorder')),
    strategy            text,
    strategy_version    text,
    input_token_count   bigint CHECK (input_token_count >= 0),
    output_token_count  bigint CHECK (output_token_count >= 0),
    input_item_count    bigint CHECK (input_item_count >= 0),
    output_item_count   bigint CHECK (output_item_count >= 0),
    metadata            json,
    created_at_ms       bigint NOT NULL,
    PRIMARY KEY (tenant_id, project_id, derivation_id),
    CHECK (source_window_id <> target_window_id),
    FOREIGN KEY (tenant_id, project_id, source_window_id)
        REFERENCES context_windows (tenant_id, project_id, window_id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, project_id, target_window_id)
        REFERENCES context_windows (tenant_id, project_id, window_id) ON DELETE CASCADE
);

-- Lineage and the cycle check walk from a window to its sources.
CREATE INDEX window_derivations_by_target
    ON window_derivations (tenant_id, project_id, target_window_id, source_window_id);
-- The cascade from a deleted source window.
CREATE INDEX window_derivations_by_source
    ON window_derivations (tenant_id, project_id, source_window_id);
CREATE INDEX window_derivations_by_conversation
    ON window_derivations (tenant_id, project_id, conversation_id);

-- model_invocations holds the audit record of every model call: what was sent (the
-- request window, same conversation), what it cost and what came back.
-- response_content is bytea for the same reason as item content; error is json.
CREATE TABLE model_invocations (
    tenant_id          text   NOT NULL,
    project_id         text   NOT NULL,
    invocation_id      text   NOT NULL,
    conversation_id    text   NOT NULL,
    request_window_id  text   NOT NULL,
    agent_id           text   NOT NULL,
    tool_name          text,
    provider           text   NOT NULL,
    model              text   NOT NULL,
    state              text   NOT NULL CHECK (state IN ('succeeded', 'failed', 'canceled')),
    input_tokens       bigint NOT NULL CHECK (input_tokens >= 0),
    output_tokens      bigint NOT NULL CHECK (output_tokens >= 0),
    cached_tokens      bigint NOT NULL CHECK (cached_tokens >= 0 AND cached_tokens <= input_tokens),
    started_at_ms      bigint NOT NULL CHECK (started_at_ms >= 0),
    completed_at_ms    bigint NOT NULL CHECK (completed_at_ms >= 0),
    latency_ms         bigint NOT NULL CHECK (latency_ms >= 0),
    finish_reason      text,
    response_content   bytea,
    error              json,
    metadata           json,
    created_at_ms      bigint NOT NULL,
    PRIMARY KEY (tenant_id, project_id, invocation_id)
);

-- Cost attribution (docs/costs.md) filters on started_at_ms and groups by agent, tool,
-- model or conversation; the conversation index also serves deletion.
CREATE INDEX model_invocations_by_time
    ON model_invocations (tenant_id, project_id, started_at_ms);
CREATE INDEX model_invocations_by_agent
    ON model_invocations (tenant_id, project_id, agent_id, started_at_ms);
CREATE INDEX model_invocations_by_tool
    ON model_invocations (tenant_id, project_id, tool_name, started_at_ms);
CREATE INDEX model_invocations_by_model
    ON model_invocations (tenant_id, project_id, model, started_at_ms);
CREATE INDEX model_invocations_by_conversation
    ON model_invocations (tenant_id, project_id, conversation_id, started_at_ms);

-- +goose Down
DROP TABLE model_invocations;
DROP TABLE window_derivations;
DROP TABLE context_window_items;
DROP TABLE context_windows;
