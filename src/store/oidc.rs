//! What signing in through an OpenID Connect provider keeps: the sign-ins begun (until the
//! browser comes back, once) and which user a provider's subject is.

use super::{StoreResult, Tx, UserRecord, now_ms};

/// A sign-in begun at the provider, as kept for the browser's return.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OidcSignInRecord {
    pub nonce: String,
    pub verifier: String,
    pub next_path: String,
    pub created_ms: i64,
}

impl Tx {
    /// Keeps a sign-in begun; sign-ins older than `void_before_ms` are forgotten meanwhile.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn insert_oidc_sign_in(
        &mut self,
        state_hash: &str,
        record: &OidcSignInRecord,
        void_before_ms: i64,
    ) -> StoreResult<()> {
        sqlx::query(self.sql("DELETE FROM oidc_sign_ins WHERE created_ms < ?"))
            .bind(void_before_ms)
            .execute(&mut *self.inner)
            .await?;
        sqlx::query(self.sql(
            "INSERT INTO oidc_sign_ins (state_hash, nonce, verifier, next_path, created_ms) \
             VALUES (?, ?, ?, ?, ?)",
        ))
        .bind(state_hash)
        .bind(&record.nonce)
        .bind(&record.verifier)
        .bind(&record.next_path)
        .bind(record.created_ms)
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    /// The sign-in whose state hashes to `state_hash`, taken (a second return with the
    /// same state finds nothing).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn take_oidc_sign_in(
        &mut self,
        state_hash: &str,
    ) -> StoreResult<Option<OidcSignInRecord>> {
        let found: Option<OidcSignInRecord> = sqlx::query_as(self.sql(
            "SELECT nonce, verifier, next_path, created_ms FROM oidc_sign_ins WHERE state_hash = ?",
        ))
        .bind(state_hash)
        .fetch_optional(&mut *self.inner)
        .await?;
        let done = sqlx::query(self.sql("DELETE FROM oidc_sign_ins WHERE state_hash = ?"))
            .bind(state_hash)
            .execute(&mut *self.inner)
            .await?;
        // Taken by a simultaneous return meanwhile: not this one's.
        Ok(found.filter(|_| done.rows_affected() == 1))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn user_by_oidc_sub(&mut self, sub: &str) -> StoreResult<Option<UserRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, username, password_hash, is_admin, disabled, created_ms FROM users \
             WHERE oidc_sub = ?",
        ))
        .bind(sub)
        .fetch_optional(&mut *self.inner)
        .await?)
    }

    /// Links a user to the provider's subject.
    #[tracing::instrument(level = "debug", skip_all, fields(id = %user_id))]
    pub async fn set_oidc_sub(&mut self, user_id: &str, sub: &str) -> StoreResult<()> {
        sqlx::query(self.sql("UPDATE users SET oidc_sub = ?, updated_ms = ? WHERE id = ?"))
            .bind(sub)
            .bind(now_ms())
            .bind(user_id)
            .execute(&mut *self.inner)
            .await?;
        Ok(())
    }
}
