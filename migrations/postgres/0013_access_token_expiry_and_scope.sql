-- A personal access token may expire (NULL: it does not) and may be read-only (1: it
-- views what its owner may view and changes nothing, whatever its owner's role).
ALTER TABLE access_tokens ADD COLUMN expires_ms BIGINT NULL;
ALTER TABLE access_tokens ADD COLUMN read_only INTEGER NOT NULL DEFAULT 0;
