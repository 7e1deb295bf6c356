-- +goose Up
-- Agent-to-agent coordination (docs/a2a.md): agents, messages, tasks and the per-scope
-- event log. docs/a2a.md explains the locking and ordering these tables serve.

-- a2a_heads is one row per scope that has coordination state. It is the scope's lock:
-- every transaction that appends events increments last_seq under this row's lock and
-- holds it until it commits, so sequence order is commit order. Messages are numbered
-- the same way by last_message_seq. live_messages counts the scope's rows in
-- a2a_messages exactly (every insert and delete of a message updates it under the same
-- lock), so the per-scope bound needs no count(*). swept_at_ms records when the
-- background sweeper last finished the scope.
CREATE TABLE a2a_heads (
    tenant_id         text    NOT NULL,
    project_id        text    NOT NULL,
    last_seq          bigint  NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    last_message_seq  bigint  NOT NULL DEFAULT 0 CHECK (last_message_seq >= 0),
    live_messages     integer NOT NULL DEFAULT 0 CHECK (live_messages >= 0),
    swept_at_ms    bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, project_id)
);

-- a2a_events is the scope's event log. Payloads hold IDs, never content.
-- target_agents empty means every agent of the scope may see the event; otherwise only
-- the listed ones. consistency is 0 local, 1 eventual, 2 strong. task_id and
-- conversation_id repeat what the payload names for the poll filter and for
-- conversation deletion (which removes the events naming a deleted conversation).
CREATE TABLE a2a_events (
    tenant_id        text     NOT NULL,
    project_id       text     NOT NULL,
    seq              bigint   NOT NULL CHECK (seq > 0),
    event_id         text     NOT NULL,
    kind             text     NOT NULL CHECK (kind IN ('message_posted', 'task_created', 'task_updated',
                                  'task_message', 'agent_registered', 'envelope_received', 'entry_written',
                                  'window_created')),
    actor            text     NOT NULL,
    correlation_id   text     NOT NULL,
    target_agents    text[]   NOT NULL DEFAULT '{}',
    consistency      smallint NOT NULL CHECK (consistency BETWEEN 0 AND 2),
    task_id          text,
    conversation_id  text,
    payload          json     NOT NULL,
    created_at_ms    bigint   NOT NULL,
    PRIMARY KEY (tenant_id, project_id, seq)
);

-- The retention purge takes the oldest events of a scope.
CREATE INDEX a2a_events_by_time ON a2a_events (tenant_id, project_id, created_at_ms);
-- Conversation deletion removes the events that name the conversation.
CREATE INDEX a2a_events_by_conversation ON a2a_events (tenant_id, project_id, conversation_id)
    WHERE conversation_id IS NOT NULL;

-- a2a_agents holds the registered agents of a scope.
CREATE TABLE a2a_agents (
    tenant_id           text    NOT NULL,
    project_id          text    NOT NULL,
    agent_id            text    NOT NULL,
    agent_type          text    NOT NULL,
    role                text,
    capabilities        text[]  NOT NULL,
    supported_versions  text[]  NOT NULL,
    registered_at_ms    bigint  NOT NULL,
    last_seen_at_ms     bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, agent_id)
);

-- a2a_messages holds the live messages of a scope (at most the configured bound per
-- scope; expired ones are purged). seq numbers them in commit order (under the head's
-- lock), which the read watermarks rely on. metadata is json so the client's text
-- comes back as sent.
CREATE TABLE a2a_messages (
    tenant_id       text    NOT NULL,
    project_id      text    NOT NULL,
    message_id      text    NOT NULL,
    seq             bigint  NOT NULL,
    correlation_id  text    NOT NULL,
    from_agent      text    NOT NULL,
    to_agent        text,
    task_id         text,
    category        text    NOT NULL CHECK (category IN ('task_delegation', 'task_update', 'task_result',
                                'context_share', 'question', 'answer', 'notification', 'handoff')),
    priority        text    NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'critical')),
    privacy         text    NOT NULL CHECK (privacy IN ('public', 'team', 'private')),
    content         text    NOT NULL,
    metadata        json,
    created_at_ms   bigint  NOT NULL,
    expires_at_ms   bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, message_id),
    CHECK (privacy <> 'private' OR to_agent IS NOT NULL),
    CHECK (expires_at_ms > created_at_ms)
);

-- Reads and snapshots list in (created_at_ms, message_id) order; the bound evicts the
-- oldest first.
CREATE INDEX a2a_messages_by_time ON a2a_messages (tenant_id, project_id, created_at_ms, message_id);
-- The purge of expired messages.
CREATE INDEX a2a_messages_by_expiry ON a2a_messages (tenant_id, project_id, expires_at_ms);
-- Unread reads start at the reader's watermark.
CREATE UNIQUE INDEX a2a_messages_by_seq ON a2a_messages (tenant_id, project_id, seq);

-- a2a_message_reads records which agent has read which message, by the message's
-- sequence: sequences are never reused, so a mark can never make a later message of
-- the same ID look read. Deleting messages deletes their marks in the same statement;
-- a mark a concurrent read wrote for a message being deleted is removed by the
-- sweeper. (No foreign key: its check per mark cost more than the read itself.)
CREATE TABLE a2a_message_reads (
    tenant_id    text   NOT NULL,
    project_id   text   NOT NULL,
    message_seq  bigint NOT NULL,
    agent_id     text   NOT NULL,
    read_at_ms   bigint NOT NULL,
    PRIMARY KEY (tenant_id, project_id, message_seq, agent_id)
);

-- a2a_read_watermarks holds, per reading agent, a message sequence up to which every
-- message it may see has been read (or expired): its unread reads scan only what
-- follows, not every message it ever read. Sequences are commit order, so a message
-- committed later always lands above the watermark.
CREATE TABLE a2a_read_watermarks (
    tenant_id   text   NOT NULL,
    project_id  text   NOT NULL,
    agent_id    text   NOT NULL,
    seq         bigint NOT NULL,
    PRIMARY KEY (tenant_id, project_id, agent_id)
);

-- a2a_tasks holds task headers. list_seq is the sequence of the task's task_created
-- event: lists page in commit order, so a page never skips a task committed behind
-- it. create_digest is the SHA-256 of the normalized create request, so a retried
-- create is told from a different one without reading the task back. The counts and
-- parts_bytes bound a task's children; terminal_at_ms is set exactly when the state
-- is terminal, for retention.
CREATE TABLE a2a_tasks (
    tenant_id       text    NOT NULL,
    project_id      text    NOT NULL,
    task_id         text    NOT NULL,
    list_seq        bigint  NOT NULL,
    context_id      text    NOT NULL,
    from_agent      text    NOT NULL,
    to_agent        text    NOT NULL,
    state           text    NOT NULL CHECK (state IN ('created', 'working', 'input-required', 'completed',
                                'failed', 'canceled')),
    description     text    NOT NULL,
    metadata        json,
    create_digest   text    NOT NULL,
    version         bigint  NOT NULL CHECK (version >= 1),
    message_count   integer NOT NULL CHECK (message_count >= 0),
    artifact_count  integer NOT NULL CHECK (artifact_count >= 0),
    history_count   integer NOT NULL CHECK (history_count >= 1),
    parts_bytes     bigint  NOT NULL CHECK (parts_bytes >= 0),
    created_at_ms   bigint  NOT NULL,
    updated_at_ms   bigint  NOT NULL,
    terminal_at_ms  bigint,
    PRIMARY KEY (tenant_id, project_id, task_id),
    CHECK ((state IN ('completed', 'failed', 'canceled')) = (terminal_at_ms IS NOT NULL))
);

CREATE UNIQUE INDEX a2a_tasks_by_list ON a2a_tasks (tenant_id, project_id, list_seq);
CREATE INDEX a2a_tasks_by_from ON a2a_tasks (tenant_id, project_id, from_agent, list_seq);
CREATE INDEX a2a_tasks_by_to ON a2a_tasks (tenant_id, project_id, to_agent, list_seq);
-- pendingCount: the open tasks addressed to an agent.
CREATE INDEX a2a_tasks_open_by_to ON a2a_tasks (tenant_id, project_id, to_agent) WHERE terminal_at_ms IS NULL;
-- Retention of terminal tasks.
CREATE INDEX a2a_tasks_terminal ON a2a_tasks (tenant_id, project_id, terminal_at_ms) WHERE terminal_at_ms IS NOT NULL;

-- A task's messages, artifacts and transition history, in their own rows so that a
-- change appends rows instead of rewriting the task. parts is the JSON array of parts
-- as sent (json, not jsonb: member order and number spelling survive).
CREATE TABLE a2a_task_messages (
    tenant_id      text    NOT NULL,
    project_id     text    NOT NULL,
    task_id        text    NOT NULL,
    ordinal        integer NOT NULL CHECK (ordinal >= 0),
    role           text    NOT NULL CHECK (role IN ('user', 'agent')),
    from_agent     text    NOT NULL,
    parts          json    NOT NULL,
    created_at_ms  bigint  NOT NULL,
    PRIMARY KEY (tenant_id, project_id, task_id, ordinal),
    FOREIGN KEY (tenant_id, project_id, task_id)
        REFERENCES a2a_tasks (tenant_id, project_id, task_id) ON DELETE CASCADE
);

CREATE TABLE a2a_task_artifacts (
    tenant_id    text    NOT NULL,
    project_id   text    NOT NULL,
    task_id      text    NOT NULL,
    artifact_id  text    NOT NULL,
    ordinal      integer NOT NULL CHECK (ordinal >= 0),
    name         text,
    parts        json    NOT NULL,
    parts_bytes  bigint  NOT NULL CHECK (parts_bytes >= 0),
    PRIMARY KEY (tenant_id, project_id, task_id, artifact_id),
    FOREIGN KEY (tenant_id, project_id, task_id)
        REFERENCES a2a_tasks (tenant_id, project_id, task_id) ON DELETE CASCADE
);

CREATE TABLE a2a_task_history (
    tenant_id   text    NOT NULL,
    project_id  text    NOT NULL,
    task_id     text    NOT NULL,
    ordinal     integer NOT NULL CHECK (ordinal >= 0),
    from_state  text,
    to_state    text    NOT NULL,
    at_ms       bigint  NOT NULL,
    reason      text,
    actor       text    NOT NULL,
    PRIMARY KEY (tenant_id, project_id, task_id, ordinal),
    FOREIGN KEY (tenant_id, project_id, task_id)
        REFERENCES a2a_tasks (tenant_id, project_id, task_id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE a2a_task_history;
DROP TABLE a2a_task_artifacts;
DROP TABLE a2a_task_messages;
DROP TABLE a2a_tasks;
DROP TABLE a2a_read_watermarks;
DROP TABLE a2a_message_reads;
DROP TABLE a2a_messages;
DROP TABLE a2a_agents;
DROP TABLE a2a_events;
DROP TABLE a2a_heads;
