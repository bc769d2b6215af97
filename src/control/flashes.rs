//! One-time notes from a console POST to the next GET of a page in the same session
//! (post-redirect-get), kept as rows in SQL (see `store::flashes`) rather than in a URL:
//! the GET that shows them deletes them, so a reload or another tab shows them no more.
//! A note is any value as JSON: `reveal` keeps the secrets it shows once this way, the
//! console a summary of an applied policy file.

use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::auth::hash_secret;

use super::{Control, ControlError, ControlResult};

impl Control {
    /// Leaves `note` for the next GET of `page` in the session whose cookie token is
    /// `session`, in a transaction of its own (a secret is kept in the transaction that
    /// made it instead: see `Reveal::keep`).
    #[tracing::instrument(level = "debug", skip_all, fields(page = %page))]
    pub async fn leave_flash(
        &self,
        session: &SecretString,
        page: &str,
        note: &impl Serialize,
    ) -> ControlResult<()> {
        let payload = serde_json::to_string(note)
            .map_err(|e| ControlError::Internal(anyhow::anyhow!("a flash serialises: {e}")))?;
        let mut tx = self.store.begin().await?;
        tx.insert_flash(&hash_secret(session.expose_secret()), page, &payload)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The notes waiting for `page` in this session, oldest first, each given once: the
    /// GET that reads them deletes them. One that cannot be read as a `T` is dropped
    /// (and logged). Costs one statement when none waits, two when some do.
    #[tracing::instrument(level = "debug", skip_all, fields(page = %page))]
    pub async fn take_flashes<T: DeserializeOwned>(
        &self,
        session: &SecretString,
        page: &str,
    ) -> ControlResult<Vec<T>> {
        let session_hash = hash_secret(session.expose_secret());
        let mut tx = self.store.begin_read().await?;
        let waiting = tx.flashes_for(&session_hash, page).await?;
        tx.commit().await?;
        if waiting.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.store.begin().await?;
        let deleted = tx.delete_flashes(&session_hash, page).await?;
        tx.commit().await?;
        if deleted == 0 {
            // Another request (a second tab, a double reload) showed them first.
            return Ok(Vec::new());
        }
        Ok(waiting
            .into_iter()
            .filter_map(|(id, payload)| match serde_json::from_str(&payload) {
                Ok(note) => Some(note),
                Err(e) => {
                    tracing::error!(flash = %id, error = %e, "an unreadable flash was dropped");
                    None
                }
            })
            .collect())
    }
}
