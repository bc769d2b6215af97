-- Console sessions: the cookie carries a random token, the table its SHA-256 and the
-- session's CSRF token. Rows live in SQL so that any instance serves any session and
-- signing out (or disabling a user) ends a session everywhere at once.
CREATE TABLE sessions (
    id_hash VARCHAR(64) PRIMARY KEY,
    user_id VARCHAR(32) NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token VARCHAR(64) NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL
);

CREATE INDEX sessions_by_user ON sessions (user_id);
