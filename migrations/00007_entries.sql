-- +goose Up
-- context_entries holds context entries (docs/entries.md), the source of truth of recall:
-- the vector projection below is derived from them and can be rebuilt at any time.
-- content and the client fields never change after the insert; status, superseded_by,
-- merged_into, expires_at_ms (set by an expiry), status_reason and updated_at_ms do.
-- request_sha256 is the digest of the normalized request that created the entry, so an
-- idempotent retry is recognized even after the entry's status changed.
-- search is the full-text document built by the service, as for messages
-- (adapters/postgres/textsearch.go), with every lexeme prefixed by the scope's tag.
-- metadata is json, kept as the client sent it.
CREATE TABLE context_entries (
    tenant_id          text    NOT NULL,
    project_id         text    NOT NULL,
    entry_id           text    NOT NULL,
    kind               text    NOT NULL CHECK (kind IN ('fact', 'preference', 'instruction', 'summary', 'observation')),
    content            text    NOT NULL,
    conversation_id    text,
    source_record_ids  text[]  NOT NULL,
    tags               text[]  NOT NULL,
    importance         double precision NOT NULL CHECK (importance >= 0 AND importance <= 1),
    expires_at_ms      bigint,
    metadata           json,
    status             text    NOT NULL CHECK (status IN ('active', 'superseded', 'merged', 'expired')),
    version            bigint  NOT NULL CHECK (version >= 1),
    supersedes         text,
    superseded_by      text,
    merged_into        text,
    status_reason      text,
    request_sha256     text    NOT NULL,
    created_at_ms      bigint  NOT NULL,
    updated_at_ms      bigint  NOT NULL,
    search             tsvector NOT NULL,
    PRIMARY KEY (tenant_id, project_id, entry_id),
    CHECK ((status = 'superseded') = (superseded_by IS NOT NULL)),
    CHECK ((status = 'merged') = (merged_into IS NOT NULL))
);

-- Conversation deletion and the conversationId filter of recall.
CREATE INDEX context_entries_by_conversation
    ON context_entries (tenant_id, project_id, conversation_id);

-- The text half of recall searches active entries only. The index is on the document
-- alone: its lexemes carry the scope's tag (scopeTag, adapters/postgres/entry.go), so
-- each posting list is one scope's, where a (tenant_id, project_id, search) key would
-- make every search read the whole scope's posting list.
CREATE INDEX context_entries_search
    ON context_entries USING gin (search) WHERE status = 'active';

-- The watermark: the newest entry of a scope.
CREATE INDEX context_entries_by_created
    ON context_entries (tenant_id, project_id, created_at_ms);

-- vector_models lists the vector tables, one per embedding model (a small global table,
-- like server_secrets). A model's table is created by the service when the model is
-- first used (EnsureModel, adapters/postgres/projection.go): entry_vectors_<n>, with a
-- vector(d) column (halfvec(d) above 2,000 dimensions) and its HNSW cosine index, and
-- holds the generations of every scope embedded with that model.
CREATE TABLE vector_models (
    model_id       text    PRIMARY KEY,
    dimensions     integer NOT NULL CHECK (dimensions BETWEEN 1 AND 16000),
    table_name     text    NOT NULL UNIQUE,
    created_at_ms  bigint  NOT NULL
);
CREATE SEQUENCE vector_model_tables;

-- entry_projections is the head row of a scope's vector projection: the lock that
-- serializes a generation switch against the writers of vectors, the next generation
-- number, and whether a rebuild named its embedder (pinned: a change of the configured
-- embedder then leaves the scope alone).
CREATE TABLE entry_projections (
    tenant_id        text    NOT NULL,
    project_id       text    NOT NULL,
    next_generation  bigint  NOT NULL CHECK (next_generation >= 1),
    pinned           boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant_id, project_id)
);

-- entry_generations lists a scope's generations: the active one serves recall, a
-- building one is filled by its rebuild operation (and by the writers of new vectors)
-- until it becomes active, a retired one waits for its rows to be dropped.
CREATE TABLE entry_generations (
    tenant_id      text   NOT NULL,
    project_id     text   NOT NULL,
    generation     bigint NOT NULL CHECK (generation >= 1),
    model_id       text   NOT NULL REFERENCES vector_models (model_id),
    state          text   NOT NULL CHECK (state IN ('building', 'active', 'retired')),
    operation_id   text,
    created_at_ms  bigint NOT NULL,
    PRIMARY KEY (tenant_id, project_id, generation),
    CHECK ((state = 'building') = (operation_id IS NOT NULL))
);
CREATE UNIQUE INDEX entry_generations_active
    ON entry_generations (tenant_id, project_id) WHERE state = 'active';

-- entry_projection_queue is the backlog: entries written and not yet embedded into
-- every live generation of their scope (pendingEntries counts it). A row is written in
-- the transaction of its entry and removed in the transaction that stores its vectors;
-- a worker claims rows by a lease (claim, claimed_until_ms) while it embeds them
-- outside any transaction. created_at_ms is the entry's, for indexedThroughMs.
CREATE TABLE entry_projection_queue (
    tenant_id         text   NOT NULL,
    project_id        text   NOT NULL,
    entry_id          text   NOT NULL,
    conversation_id   text,
    created_at_ms     bigint NOT NULL,
    claim             text,
    claimed_until_ms  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, project_id, entry_id)
);
CREATE INDEX entry_projection_queue_by_created
    ON entry_projection_queue (tenant_id, project_id, created_at_ms);
CREATE INDEX entry_projection_queue_by_conversation
    ON entry_projection_queue (tenant_id, project_id, conversation_id);

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT table_name FROM vector_models LOOP
        EXECUTE format('DROP TABLE IF EXISTS %I', t);
    END LOOP;
END $$;
-- +goose StatementEnd
DROP TABLE entry_projection_queue;
DROP TABLE entry_generations;
DROP TABLE entry_projections;
DROP SEQUENCE vector_model_tables;
DROP TABLE vector_models;
DROP TABLE context_entries;
