use serde::Serialize;

use super::{StoreResult, Tx, new_id, now_ms};

/// An API key as listed: never the key itself, which only its creator ever saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ApiKeyRecord {
    pub id: String,
    pub label: String,
    pub created_by: String,
    pub created_ms: i64,
    pub last_used_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
    /// When it stops working by itself (Unix ms), if ever.
    pub expires_ms: Option<i64>,
    /// Its first characters ("rk_key_3fa9"), to tell keys apart; `None` for a key made
    /// before they were kept.
    pub key_prefix: Option<String>,
    /// The key that replaced it in a rotation, if one did.
    pub replaced_by: Option<String>,
}

/// What the acquire path needs to know of a key, loaded into memory by the sync task: a
/// live key, or one revoked lately (refused, and counted for its application).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyGrant {
    pub key_hash: String,
    pub key_id: String,
    pub app_slug: String,
    pub expires_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
}

/// How long a revoked key is still recognised (as revoked, never as live): a client still
/// sending it is counted for its application, for that long, rather than as a stranger.
pub const REVOKED_KEYS_KEPT_MS: i64 = 30 * 24 * 3600 * 1000;

impl Tx {
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn insert_api_key(
        &mut self,
        app_id: &str,
        label: &str,
        key_hash: &str,
        key_prefix: &str,
        created_by: &str,
        expires_ms: Option<i64>,
    ) -> StoreResult<ApiKeyRecord> {
        let record = ApiKeyRecord {
            id: new_id(),
            label: label.to_owned(),
            created_by: created_by.to_owned(),
            created_ms: now_ms(),
            last_used_ms: None,
            revoked_ms: None,
            expires_ms,
            key_prefix: Some(key_prefix.to_owned()),
            replaced_by: None,
        };
        sqlx::query(self.sql(
            "INSERT INTO api_keys (id, app_id, label, key_hash, key_prefix, created_by, \
             created_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        ))
        .bind(&record.id)
        .bind(app_id)
        .bind(&record.label)
        .bind(key_hash)
        .bind(key_prefix)
        .bind(&record.created_by)
        .bind(record.created_ms)
        .bind(record.expires_ms)
        .execute(&mut *self.inner)
        .await?;
        Ok(record)
    }

    /// Revokes a live key of the application; returns it as it was, `None` if no such
    /// live key exists there.
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id, key_id = %key_id))]
    pub async fn revoke_api_key(
        &mut self,
        app_id: &str,
        key_id: &str,
    ) -> StoreResult<Option<ApiKeyRecord>> {
        let before = self.live_api_key(app_id, key_id).await?;
        if before.is_some() {
            sqlx::query(self.sql("UPDATE api_keys SET revoked_ms = ? WHERE id = ?"))
                .bind(now_ms())
                .bind(key_id)
                .execute(&mut *self.inner)
                .await?;
        }
        Ok(before)
    }

    /// A key of the application that is not revoked (it may have expired).
    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id, key_id = %key_id))]
    pub async fn live_api_key(
        &mut self,
        app_id: &str,
        key_id: &str,
    ) -> StoreResult<Option<ApiKeyRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, label, created_by, created_ms, last_used_ms, revoked_ms, expires_ms, \
             key_prefix, replaced_by FROM api_keys \
             WHERE app_id = ? AND id = ? AND revoked_ms IS NULL",
        ))
        .bind(app_id)
        .bind(key_id)
        .fetch_optional(&mut *self.inner)
        .await?)
    }

    /// Records that `key_id` was rotated away, replaced by `new_id`.
    #[tracing::instrument(level = "debug", skip_all, fields(key_id = %key_id))]
    pub async fn set_api_key_replaced_by(&mut self, key_id: &str, new_id: &str) -> StoreResult<()> {
        sqlx::query(self.sql("UPDATE api_keys SET replaced_by = ? WHERE id = ?"))
            .bind(new_id)
            .bind(key_id)
            .execute(&mut *self.inner)
            .await?;
        Ok(())
    }

    /// Sets when a key stops working.
    #[tracing::instrument(level = "debug", skip_all, fields(key_id = %key_id))]
    pub async fn set_api_key_expiry(&mut self, key_id: &str, expires_ms: i64) -> StoreResult<()> {
        sqlx::query(self.sql("UPDATE api_keys SET expires_ms = ? WHERE id = ?"))
            .bind(expires_ms)
            .bind(key_id)
            .execute(&mut *self.inner)
            .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(app_id = %app_id))]
    pub async fn list_api_keys(&mut self, app_id: &str) -> StoreResult<Vec<ApiKeyRecord>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, label, created_by, created_ms, last_used_ms, revoked_ms, expires_ms, \
             key_prefix, replaced_by FROM api_keys WHERE app_id = ? ORDER BY created_ms, id",
        ))
        .bind(app_id)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// Every key that may be used now, and those revoked in the last
    /// [`REVOKED_KEYS_KEPT_MS`] (with `revoked_ms`).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn key_grants(&mut self) -> StoreResult<Vec<KeyGrant>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT k.key_hash, k.id AS key_id, a.slug AS app_slug, k.expires_ms, k.revoked_ms \
             FROM api_keys k JOIN apps a ON a.id = k.app_id \
             WHERE k.revoked_ms IS NULL OR k.revoked_ms > ?",
        ))
        .bind(now_ms() - REVOKED_KEYS_KEPT_MS)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// Records when keys were last used (collected in memory off the hot path).
    #[tracing::instrument(level = "debug", skip_all, fields(keys = used.len()))]
    pub async fn touch_api_keys(&mut self, used: &[(String, i64)]) -> StoreResult<()> {
        for (key_id, at_ms) in used {
            sqlx::query(self.sql(
                "UPDATE api_keys SET last_used_ms = ? WHERE id = ? \
                 AND (last_used_ms IS NULL OR last_used_ms < ?)",
            ))
            .bind(*at_ms)
            .bind(key_id)
            .bind(*at_ms)
            .execute(&mut *self.inner)
            .await?;
        }
        Ok(())
    }
}
