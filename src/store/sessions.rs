//! Console sessions. Only the SHA-256 of a session token is stored, so a leaked table
//! grants nothing; the session's CSRF token lives beside it.

use secrecy::SecretString;

use super::{StoreResult, Tx, UserRecord, now_ms};

/// A live session with its (enabled) user.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    pub csrf_token: SecretString,
    pub expires_ms: i64,
    pub user: UserRecord,
}

#[derive(sqlx::FromRow)]
struct SessionRow {
    csrf_token: String,
    expires_ms: i64,
    id: String,
    username: String,
    password_hash: String,
    is_admin: i64,
    disabled: i64,
    created_ms: i64,
}

impl Tx {
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn insert_session(
        &mut self,
        id_hash: &str,
        user_id: &str,
        csrf_token: &str,
        expires_ms: i64,
    ) -> StoreResult<()> {
        let now = now_ms();
        // Expired sessions go when a new one comes: no background job needed.
        sqlx::query(self.sql("DELETE FROM sessions WHERE expires_ms < ?"))
            .bind(now)
            .execute(&mut *self.inner)
            .await?;
        sqlx::query(self.sql(
            "INSERT INTO sessions (id_hash, user_id, csrf_token, created_ms, expires_ms) \
             VALUES (?, ?, ?, ?, ?)",
        ))
        .bind(id_hash)
        .bind(user_id)
        .bind(csrf_token)
        .bind(now)
        .bind(expires_ms)
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    /// The session with this token hash, if it has not expired and its user is enabled.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn session(&mut self, id_hash: &str) -> StoreResult<Option<SessionRecord>> {
        let row: Option<SessionRow> = sqlx::query_as(self.sql(
            "SELECT s.csrf_token, s.expires_ms, u.id, u.username, u.password_hash, u.is_admin, \
             u.disabled, u.created_ms FROM sessions s JOIN users u ON u.id = s.user_id \
             WHERE s.id_hash = ? AND s.expires_ms > ? AND u.disabled = 0",
        ))
        .bind(id_hash)
        .bind(now_ms())
        .fetch_optional(&mut *self.inner)
        .await?;
        Ok(row.map(|r| SessionRecord {
            csrf_token: SecretString::from(r.csrf_token),
            expires_ms: r.expires_ms,
            user: UserRecord {
                id: r.id,
                username: r.username,
                password_hash: r.password_hash,
                is_admin: r.is_admin,
                disabled: r.disabled,
                created_ms: r.created_ms,
            },
        }))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_session(&mut self, id_hash: &str) -> StoreResult<()> {
        sqlx::query(self.sql("DELETE FROM sessions WHERE id_hash = ?"))
            .bind(id_hash)
            .execute(&mut *self.inner)
            .await?;
        Ok(())
    }

    /// Ends a user's sessions (all, or all but `keep`): after a password change or reset,
    /// or when the user is disabled.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id))]
    pub async fn delete_sessions_of_user(
        &mut self,
        user_id: &str,
        keep: Option<&str>,
    ) -> StoreResult<()> {
        sqlx::query(self.sql("DELETE FROM sessions WHERE user_id = ? AND id_hash <> ?"))
            .bind(user_id)
            .bind(keep.unwrap_or(""))
            .execute(&mut *self.inner)
            .await?;
        Ok(())
    }
}
