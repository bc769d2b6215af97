use super::{StoreResult, Tx, UserRecord, new_id, now_ms};

/// A personal access token as its owner sees it listed: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AccessTokenRecord {
    pub id: String,
    pub label: String,
    pub created_ms: i64,
    pub last_used_ms: Option<i64>,
    /// When it stops working by itself; `None`: never.
    pub expires_ms: Option<i64>,
    /// 1: it only reads, whatever its owner may do.
    pub read_only: i64,
}

impl AccessTokenRecord {
    pub fn is_read_only(&self) -> bool {
        self.read_only != 0
    }
}

/// What a new token may do, and until when.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenTerms {
    pub expires_ms: Option<i64>,
    pub read_only: bool,
}

/// The user behind a personal access token.
#[derive(Debug, Clone)]
pub struct TokenOwner {
    pub token_id: String,
    pub user: UserRecord,
    /// The token only reads, whatever the user may do.
    pub read_only: bool,
    /// When the token expired, if it has: it acts for no one then.
    pub expired_at: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct OwnerRow {
    token_id: String,
    id: String,
    username: String,
    password_hash: String,
    is_admin: i64,
    disabled: i64,
    created_ms: i64,
    read_only: i64,
    expires_ms: Option<i64>,
}

/// Tokens are marked used at most this often, so the admin API does not write per request.
const TOUCH_EVERY_MS: i64 = 60_000;

impl Tx {
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn insert_access_token(
        &mut self,
        user_id: &str,
        label: &str,
        token_hash: &str,
        terms: TokenTerms,
    ) -> StoreResult<String> {
        let id = new_id();
        sqlx::query(self.sql(
            "INSERT INTO access_tokens (id, user_id, label, token_hash, created_ms, expires_ms, \
             read_only) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(&id)
        .bind(user_id)
        .bind(label)
        .bind(token_hash)
        .bind(now_ms())
        .bind(terms.expires_ms)
        .bind(i64::from(terms.read_only))
        .execute(&mut *self.inner)
        .await?;
        Ok(id)
    }

    /// The enabled user owning an unrevoked token with this hash, marking the token used
    /// unless it has expired (then `expired_at` says when).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn token_owner(&mut self, token_hash: &str) -> StoreResult<Option<TokenOwner>> {
        let row: Option<OwnerRow> = sqlx::query_as(self.sql(
            "SELECT t.id AS token_id, u.id, u.username, u.password_hash, u.is_admin, u.disabled, \
             u.created_ms, t.read_only, t.expires_ms FROM access_tokens t \
             JOIN users u ON u.id = t.user_id \
             WHERE t.token_hash = ? AND t.revoked_ms IS NULL AND u.disabled = 0",
        ))
        .bind(token_hash)
        .fetch_optional(&mut *self.inner)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let now = now_ms();
        let expired_at = row.expires_ms.filter(|&at| at <= now);
        if expired_at.is_none() {
            sqlx::query(self.sql(
                "UPDATE access_tokens SET last_used_ms = ? WHERE id = ? \
                 AND (last_used_ms IS NULL OR last_used_ms < ?)",
            ))
            .bind(now)
            .bind(&row.token_id)
            .bind(now - TOUCH_EVERY_MS)
            .execute(&mut *self.inner)
            .await?;
        }
        Ok(Some(TokenOwner {
            read_only: row.read_only != 0,
            expired_at,
            token_id: row.token_id,
            user: UserRecord {
                id: row.id,
                username: row.username,
                password_hash: row.password_hash,
                is_admin: row.is_admin,
                disabled: row.disabled,
                created_ms: row.created_ms,
            },
        }))
    }

    /// A user's live tokens, oldest first.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id))]
    pub async fn list_access_tokens(
        &mut self,
        user_id: &str,
    ) -> StoreResult<Vec<AccessTokenRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, label, created_ms, last_used_ms, expires_ms, read_only FROM access_tokens \
             WHERE user_id = ? AND revoked_ms IS NULL ORDER BY created_ms, id",
        ))
        .bind(user_id)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// Revokes a live token of the user; returns it as it was, `None` if the user has
    /// no such live token.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id, token_id = %token_id))]
    pub async fn revoke_access_token(
        &mut self,
        user_id: &str,
        token_id: &str,
    ) -> StoreResult<Option<AccessTokenRecord>> {
        let before: Option<AccessTokenRecord> = sqlx::query_as(self.sql(
            "SELECT id, label, created_ms, last_used_ms, expires_ms, read_only FROM access_tokens \
             WHERE user_id = ? AND id = ? AND revoked_ms IS NULL",
        ))
        .bind(user_id)
        .bind(token_id)
        .fetch_optional(&mut *self.inner)
        .await?;
        if before.is_some() {
            sqlx::query(self.sql("UPDATE access_tokens SET revoked_ms = ? WHERE id = ?"))
                .bind(now_ms())
                .bind(token_id)
                .execute(&mut *self.inner)
                .await?;
        }
        Ok(before)
    }

    /// Revokes every live token of the user (an admin reset the password: whoever knew
    /// the old one may have made tokens with it); returns how many.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id))]
    pub async fn revoke_access_tokens_of_user(&mut self, user_id: &str) -> StoreResult<u64> {
        let done = sqlx::query(self.sql(
            "UPDATE access_tokens SET revoked_ms = ? WHERE user_id = ? AND revoked_ms IS NULL",
        ))
        .bind(now_ms())
        .bind(user_id)
        .execute(&mut *self.inner)
        .await?;
        Ok(done.rows_affected())
    }
}
