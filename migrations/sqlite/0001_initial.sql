-- Flags are INTEGER 0/1 and times are BIGINT Unix milliseconds on every backend, so one
-- storage code path reads all three the same way.
CREATE TABLE users (
    id VARCHAR(32) PRIMARY KEY,
    username VARCHAR(64) NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    is_admin INTEGER NOT NULL DEFAULT 0,
    disabled INTEGER NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

CREATE TABLE apps (
    id VARCHAR(32) PRIMARY KEY,
    slug VARCHAR(63) NOT NULL UNIQUE,
    name VARCHAR(200) NOT NULL,
    description TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);

CREATE TABLE memberships (
    app_id VARCHAR(32) NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    user_id VARCHAR(32) NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role VARCHAR(16) NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (app_id, user_id)
);

CREATE TABLE api_keys (
    id VARCHAR(32) PRIMARY KEY,
    app_id VARCHAR(32) NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    label VARCHAR(200) NOT NULL,
    key_hash VARCHAR(64) NOT NULL UNIQUE,
    created_by VARCHAR(64) NOT NULL,
    created_ms BIGINT NOT NULL,
    last_used_ms BIGINT,
    revoked_ms BIGINT
);

CREATE TABLE access_tokens (
    id VARCHAR(32) PRIMARY KEY,
    user_id VARCHAR(32) NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    label VARCHAR(200) NOT NULL,
    token_hash VARCHAR(64) NOT NULL UNIQUE,
    created_ms BIGINT NOT NULL,
    last_used_ms BIGINT,
    revoked_ms BIGINT
);

CREATE TABLE policies (
    id VARCHAR(32) PRIMARY KEY,
    name VARCHAR(128) NOT NULL UNIQUE,
    app_id VARCHAR(32) NOT NULL REFERENCES apps (id),
    algorithm VARCHAR(32) NOT NULL,
    rate REAL NOT NULL,
    max_permits BIGINT NOT NULL,
    allowed_apps TEXT NOT NULL,
    failure_mode VARCHAR(8) NOT NULL,
    enabled INTEGER NOT NULL,
    description TEXT NOT NULL,
    version BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX policies_app ON policies (app_id);

CREATE TABLE audit_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms BIGINT NOT NULL,
    actor VARCHAR(64) NOT NULL,
    app_slug VARCHAR(63),
    entity_type VARCHAR(32) NOT NULL,
    entity_id VARCHAR(200) NOT NULL,
    action VARCHAR(32) NOT NULL,
    before_json TEXT,
    after_json TEXT
);
CREATE INDEX audit_app ON audit_events (app_slug, id);
CREATE INDEX audit_actor ON audit_events (actor, id);
CREATE INDEX audit_entity ON audit_events (entity_type, entity_id, id);
