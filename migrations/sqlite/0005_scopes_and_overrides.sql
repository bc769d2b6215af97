-- Whose bucket a policy's limit is (global, per_app, per_key), and the other limits of
-- some callers of a keyed policy: a JSON array of {"match", "max_permits", "rate",
-- "window_ms", "lease_ttl_ms"}, NULL when there are none.
ALTER TABLE policies ADD COLUMN scope VARCHAR(16) NOT NULL DEFAULT 'global';
ALTER TABLE policies ADD COLUMN overrides TEXT NULL;
