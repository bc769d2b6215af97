-- A user who signs in through the OpenID Connect provider is matched by the provider's
-- subject (`sub`), never by name; NULL for a user who has only a password.
ALTER TABLE users ADD COLUMN oidc_sub VARCHAR(255) NULL;
CREATE UNIQUE INDEX users_oidc_sub ON users (oidc_sub);

-- A sign-in begun at the provider, kept until the browser comes back with its `state`
-- (its SHA-256 here): the nonce the ID token must carry, the PKCE verifier that redeems
-- the code, and the console page to return to. Used once; older than ten minutes: void.
CREATE TABLE oidc_sign_ins (
    state_hash VARCHAR(64) PRIMARY KEY,
    nonce VARCHAR(64) NOT NULL,
    verifier VARCHAR(128) NOT NULL,
    next_path TEXT NOT NULL,
    created_ms BIGINT NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
