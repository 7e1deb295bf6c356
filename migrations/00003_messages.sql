-- +goose Up
-- btree_gin lets the full-text index lead with (tenant_id, project_id) like every other
-- index, so a search never leaves the caller's scope and the table can be distributed
-- by tenant later. It is a trusted extension: a database owner may create it.
CREATE EXTENSION IF NOT EXISTS btree_gin;

-- messages holds conversation records as immutable facts. A message is identified by
-- its ID within its conversation (the dedupe scope of appends); its position is the
-- sequence, unique per conversation and allocated under the head row's lock
-- (conversations.last_sequence), so pagers keyed on it never miss or repeat a row.
--
-- search is the message's full-text document, built by the service rather than by a
-- text search configuration: language-neutral words, lowercased, plus overlapping
-- bigrams of CJK and other unsegmented scripts (see adapters/postgres/textsearch.go).
-- metadata is json rather than jsonb: it keeps the client's compacted text as sent, and
-- no number spelling (1e-16000) can expand into a huge numeric.
CREATE TABLE messages (
    tenant_id        text   NOT NULL,
    project_id       text   NOT NULL,
    conversation_id  text   NOT NULL,
    message_id       text   NOT NULL,
    sequence         bigint NOT NULL CHECK (sequence > 0),
    role             text   NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    content          text   NOT NULL,
    created_at_ms    bigint NOT NULL CHECK (created_at_ms >= 0),
    metadata         json,
    search           tsvector NOT NULL,
    PRIMARY KEY (tenant_id, project_id, conversation_id, message_id)
);

-- The read path of recent and paged reads (keyset on sequence, both directions).
CREATE UNIQUE INDEX messages_by_sequence
    ON messages (tenant_id, project_id, conversation_id, sequence);

-- The search path.
CREATE INDEX messages_search
    ON messages USING gin (tenant_id, project_id, search);

-- +goose Down
DROP TABLE messages;
