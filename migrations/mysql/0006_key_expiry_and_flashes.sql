-- An API key may expire (Unix ms; NULL: never). Rotating a key sets the old one's.
ALTER TABLE api_keys ADD COLUMN expires_ms BIGINT NULL;

-- One-time messages for the next page a console session opens (post-redirect-get): a
-- secret just created (an API key, an access token) travels from the POST to the GET
-- here, never in a URL, and is deleted by the GET that shows it. Bound to the session,
-- so ending the session ends them too.
CREATE TABLE flashes (
    id VARCHAR(32) PRIMARY KEY,
    session_hash VARCHAR(64) NOT NULL REFERENCES sessions (id_hash) ON DELETE CASCADE,
    page VARCHAR(200) NOT NULL,
    payload TEXT NOT NULL,
    created_ms BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE INDEX flashes_by_session ON flashes (session_hash, page);
