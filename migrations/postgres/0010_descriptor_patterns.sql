-- A policy's Envoy-style descriptor patterns: a JSON array of {"domain" (absent: any
-- domain), "entries": ["key=value" or "key", ...]}, NULL when there are none.
ALTER TABLE policies ADD COLUMN descriptors TEXT NULL;
