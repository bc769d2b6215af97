-- Every saved version of a policy: who saved it, when, how (create, update, rollback), and
-- the whole policy as JSON in the columns' own units (rate per second, windows in ms). A
-- rollback names the version it restored. Rows outlive a deleted policy (keyed by its id,
-- so a new policy of the same name starts a history of its own).
CREATE TABLE policy_versions (
    policy_id VARCHAR(32) NOT NULL,
    version BIGINT NOT NULL,
    policy_name VARCHAR(128) NOT NULL,
    action VARCHAR(16) NOT NULL,
    restored_version BIGINT,
    author VARCHAR(64) NOT NULL,
    at_ms BIGINT NOT NULL,
    policy_json TEXT NOT NULL,
    PRIMARY KEY (policy_id, version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE INDEX policy_versions_name ON policy_versions (policy_name, at_ms);

-- History starts with each existing policy as it is now ('recorded'), authored by whoever
-- last created or changed it according to the audit log.
INSERT INTO policy_versions (policy_id, version, policy_name, action, restored_version, author, at_ms, policy_json)
SELECT p.id, p.version, p.name, 'recorded', NULL,
    COALESCE((SELECT e.actor FROM audit_events e WHERE e.entity_type = 'policy'
              AND e.entity_id = p.name AND e.action IN ('create', 'update')
              ORDER BY e.id DESC LIMIT 1), 'unknown'),
    p.updated_ms,
    JSON_OBJECT(
        'name', p.name, 'owner_app', a.slug, 'algorithm', p.algorithm, 'rate', p.rate,
        'max_permits', p.max_permits, 'window_ms', p.window_ms, 'lease_ttl_ms', p.lease_ttl_ms,
        'allowed_apps', JSON_EXTRACT(p.allowed_apps, '$'), 'failure_mode', p.failure_mode,
        'enabled', JSON_EXTRACT(IF(p.enabled <> 0, 'true', 'false'), '$'),
        'description', p.description, 'scope', p.scope,
        'overrides', JSON_EXTRACT(COALESCE(p.overrides, '[]'), '$'))
FROM policies p JOIN apps a ON a.id = p.app_id;
