//! One-time messages from a console POST to the next GET of a page (post-redirect-get):
//! a secret just created reaches the page that shows it without ever being in a URL, and
//! the GET that shows it deletes it, so reloading the page shows it no more. Rows are
//! bound to a session (by the SHA-256 of its token, as the sessions table keys it).

use super::{StoreResult, Tx, new_id, now_ms};

/// Flashes older than this are never shown (a page left unopened for long).
const FLASH_LIFETIME_MS: i64 = 10 * 60 * 1000;

impl Tx {
    /// Leaves `payload` for the next GET of `page` in this session.
    #[tracing::instrument(level = "debug", skip_all, fields(page = %page))]
    pub async fn insert_flash(
        &mut self,
        session_hash: &str,
        page: &str,
        payload: &str,
    ) -> StoreResult<()> {
        sqlx::query(self.sql(
            "INSERT INTO flashes (id, session_hash, page, payload, created_ms) \
             VALUES (?, ?, ?, ?, ?)",
        ))
        .bind(new_id())
        .bind(session_hash)
        .bind(page)
        .bind(payload)
        .bind(now_ms())
        .execute(&mut *self.inner)
        .await?;
        Ok(())
    }

    /// The flashes waiting for `page` in this session, as (id, payload), oldest first.
    #[tracing::instrument(level = "debug", skip_all, fields(page = %page))]
    pub async fn flashes_for(
        &mut self,
        session_hash: &str,
        page: &str,
    ) -> StoreResult<Vec<(String, String)>> {
        Ok(sqlx::query_as(self.sql(
            "SELECT id, payload FROM flashes WHERE session_hash = ? AND page = ? \
             AND created_ms > ? ORDER BY created_ms, id",
        ))
        .bind(session_hash)
        .bind(page)
        .bind(now_ms() - FLASH_LIFETIME_MS)
        .fetch_all(&mut *self.inner)
        .await?)
    }

    /// Deletes this session's flashes for `page`; how many were deleted: a request that
    /// deletes none lost the race to another and must not show them. (Flashes never
    /// shown go with their session.)
    #[tracing::instrument(level = "debug", skip_all, fields(page = %page))]
    pub async fn delete_flashes(&mut self, session_hash: &str, page: &str) -> StoreResult<u64> {
        let done = sqlx::query(self.sql("DELETE FROM flashes WHERE session_hash = ? AND page = ?"))
            .bind(session_hash)
            .bind(page)
            .execute(&mut *self.inner)
            .await?;
        Ok(done.rows_affected())
    }
}
