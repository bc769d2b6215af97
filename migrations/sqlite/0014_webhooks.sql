-- Webhooks of an application: where its events are sent, which ones, in which format
-- ('json': the Standard Webhooks body; 'slack': a text summary), signed with `secret`
-- (and during a rotation also with the one before, until `previous_until_ms`).
-- `events` is the comma-separated list of event types, sorted.
CREATE TABLE webhooks (
    id VARCHAR(32) PRIMARY KEY,
    app_id VARCHAR(32) NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    url VARCHAR(2048) NOT NULL,
    format VARCHAR(16) NOT NULL,
    events VARCHAR(200) NOT NULL,
    quiet_period_ms BIGINT NOT NULL,
    near_limit_below REAL NOT NULL,
    secret VARCHAR(100) NOT NULL,
    previous_secret VARCHAR(100),
    previous_until_ms BIGINT,
    created_by VARCHAR(64) NOT NULL,
    created_ms BIGINT NOT NULL
);

CREATE INDEX webhooks_app ON webhooks (app_id);

-- One event to send to one webhook. `id` is the `webhook-id` every attempt carries;
-- `data` is the event's JSON. `next_attempt_ms` NULL: no more attempts (delivered, or
-- given up). An instance claims a row until `claimed_until_ms` before sending.
CREATE TABLE webhook_deliveries (
    id VARCHAR(40) PRIMARY KEY,
    webhook_id VARCHAR(32) NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_type VARCHAR(40) NOT NULL,
    data TEXT NOT NULL,
    occurred_ms BIGINT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms BIGINT,
    claimed_until_ms BIGINT,
    delivered_ms BIGINT
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_ms);
CREATE INDEX webhook_deliveries_of ON webhook_deliveries (webhook_id, occurred_ms);

-- Each attempt of a delivery: the receiver's status (NULL: no answer, `error` says why),
-- how long it took and the start of its answer.
CREATE TABLE webhook_attempts (
    delivery_id VARCHAR(40) NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt INTEGER NOT NULL,
    at_ms BIGINT NOT NULL,
    status INTEGER,
    latency_ms BIGINT NOT NULL,
    excerpt VARCHAR(500) NOT NULL,
    error VARCHAR(500),
    PRIMARY KEY (delivery_id, attempt)
);
