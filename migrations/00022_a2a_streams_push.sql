-- +goose Up
-- Google A2A streams and push notifications (docs/a2a-protocol.md). A stream and a
-- push delivery read one task's events in sequence order: an index by task.
CREATE INDEX a2a_events_by_task ON a2a_events (tenant_id, project_id, task_id, seq)
    WHERE task_id IS NOT NULL;

-- a2a_push_configs holds a task's push notification configs (at most 10 per task),
-- and each config's delivery position: delivered_seq is the task's last event that
-- was delivered (or dropped after 24 h of failures), delivered_state the task's state
-- after it. protocol is the generation whose method set it ('0.3' or '1.0'), which
-- shapes the bodies; created_by is the participant who set it last, the only one shown
-- its token and authentication. A delivery job holds the config's lease (lease_until_ms) while it
-- delivers, so one config's deliveries never overlap and stay in commit order;
-- failures and retry_at_ms are its backoff after a failed delivery, retry_owner the job
-- that retries it.
CREATE TABLE a2a_push_configs (
    tenant_id        text    NOT NULL,
    project_id       text    NOT NULL,
    task_id          text    NOT NULL,
    config_id        text    NOT NULL,
    protocol         text    NOT NULL CHECK (protocol IN ('0.3', '1.0')),
    url              text    NOT NULL,
    token            text,
    authentication   json,
    created_by       text    NOT NULL,
    created_at_ms    bigint  NOT NULL,
    delivered_seq    bigint  NOT NULL,
    delivered_state  text    NOT NULL,
    failures         integer NOT NULL DEFAULT 0,
    retry_at_ms      bigint  NOT NULL DEFAULT 0,
    retry_owner      bigint  NOT NULL DEFAULT 0,
    lease_until_ms   bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, project_id, task_id, config_id),
    FOREIGN KEY (tenant_id, project_id, task_id)
        REFERENCES a2a_tasks (tenant_id, project_id, task_id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE a2a_push_configs;
DROP INDEX a2a_events_by_task;
