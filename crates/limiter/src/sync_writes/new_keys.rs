//! API keys just created, told to every instance through Redis until each has reloaded
//! its keys from SQL. The change notice that makes them reload is heard a few
//! milliseconds after the key is shown (or, when a notice is missed, at the next sync
//! pass), and a client may use its new key on another instance before then: that instance
//! finds the key here, not in its snapshot, and accepts it. One hash per deployment, field
//! the key's digest (hex), value what the application side needs to accept it; the hash
//! expires a while after the last key was added, and any revocation drops it whole.

use std::time::Duration;

use crate::client::{Limiter, LimiterError};

impl Limiter {
    /// Adds a key just committed to SQL (before it is shown to its creator); the hash
    /// lives `ttl` after this call.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn announce_new_key(
        &self,
        digest_hex: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        let hash = self.keys.new_keys();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(&hash, digest_hex, value)
            .ignore()
            .pexpire(&hash, ttl.as_millis().try_into().unwrap_or(i64::MAX))
            .ignore();
        let fut = pipe.query_async::<()>(&mut conn);
        self.timed_for(self.sync_timeout(), fut).await
    }

    /// What was announced of the key with this digest, if anything (on the acquire path,
    /// for a key this instance does not know: within the acquire timeout).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn new_key(&self, digest_hex: &str) -> Result<Option<String>, LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("HGET");
        cmd.arg(self.keys.new_keys()).arg(digest_hex);
        let fut = cmd.query_async::<Option<String>>(&mut conn);
        self.timed(fut).await
    }

    /// Drops every announced key: after a key is revoked, shortened or moved to another
    /// application, none may be accepted from here with what it was announced with.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn forget_new_keys(&self) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keys.new_keys());
        let fut = cmd.query_async::<i64>(&mut conn);
        self.timed_for(self.sync_timeout(), fut).await.map(|_| ())
    }
}
