//! The Redis client: one connection (a single node or a cluster), the key names, the Lua
//! scripts, and one timeout around every call.

mod connection;
pub mod functions;
mod keys;
pub mod scripts;
mod sentinel;

pub use connection::RedisConn;
pub use keys::{KeySpace, StateKey};
pub use sentinel::{SentinelUrl, is_sentinel_url};

use std::sync::Arc;
use std::time::Duration;

use prometheus::IntCounter;

/// Everything that talks to Redis, with one timeout for every call.
#[derive(Clone)]
pub struct Limiter {
    pub(crate) conn: RedisConn,
    pub(crate) keys: KeySpace,
    pub(crate) timeout: Duration,
    /// Where Redis is, as messages may name it (no password).
    address: Arc<str>,
    /// Calls made (a pipeline is one): what each part of the server asks of Redis.
    round_trips: IntCounter,
    /// Whether a global token bucket's state still in its policy's hash moves to its
    /// state key at its next write (`lua/lib/token_bucket_global.lua`).
    moves_state: bool,
    /// Whether a keyed token bucket's or GCRA bucket's expiry may be held ahead of what it
    /// needs (`lua/lib/keyed.lua`'s `keyed_store`).
    holds_keyed_expiry: bool,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum LimiterError {
    #[error("redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("unexpected reply from a limiter script: {0}")]
    Reply(String),
}

impl Limiter {
    /// A limiter on `url` (one `redis://` URL, or a comma-separated list of a cluster's);
    /// it connects at its first call, so a server starts while Redis is down.
    pub fn new(url: &str, prefix: &str, timeout: Duration) -> anyhow::Result<Self> {
        Ok(Self {
            conn: RedisConn::new(url, timeout)?,
            keys: KeySpace::new(prefix),
            timeout,
            address: shown_url(url).into(),
            round_trips: IntCounter::new("unregistered", "not exported").expect("a valid name"),
            moves_state: true,
            holds_keyed_expiry: true,
        })
    }

    /// The same limiter, leaving a global token bucket's state in its policy's hash where
    /// it still is (`false`: while instances of a version that reads it only there run on
    /// the same Redis), or moving it to its state key (`true`, the default).
    pub fn moving_state(mut self, moves: bool) -> Self {
        self.moves_state = moves;
        self
    }

    /// Whether a global token bucket's state moves from its hash to its state key.
    pub fn moves_state(&self) -> bool {
        self.moves_state
    }

    /// The same limiter, holding a keyed token bucket's or GCRA bucket's expiry ahead, in
    /// its state (`true`, the default), or setting the exact expiry at every write, in the
    /// state versions before held expiries read (`false`: while instances of such a version
    /// run on the same Redis).
    pub fn holding_keyed_expiry(mut self, holds: bool) -> Self {
        self.holds_keyed_expiry = holds;
        self
    }

    /// Whether a keyed token bucket's or GCRA bucket's expiry is held ahead.
    pub fn holds_keyed_expiry(&self) -> bool {
        self.holds_keyed_expiry
    }

    /// The same limiter, counting its calls into `counter` (a registered metric).
    pub fn counting_into(mut self, counter: IntCounter) -> Self {
        self.round_trips = counter;
        self
    }

    /// The same limiter on a connection of the calling thread's own (single node only;
    /// a cluster connection is shared as it is).
    pub fn for_this_thread(&self, url: &str) -> Self {
        match RedisConn::local(url, self.timeout) {
            Some(conn) if !self.conn.is_cluster() => Self {
                conn,
                keys: self.keys.clone(),
                timeout: self.timeout,
                address: self.address.clone(),
                round_trips: self.round_trips.clone(),
                moves_state: self.moves_state,
                holds_keyed_expiry: self.holds_keyed_expiry,
            },
            _ => self.clone(),
        }
    }

    pub fn keys(&self) -> &KeySpace {
        &self.keys
    }

    pub fn connection(&self) -> RedisConn {
        self.conn.clone()
    }

    /// Where Redis is (without a password), for messages.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Runs a Redis future under the configured timeout: a hung Redis never hangs a client.
    /// This is the one timer of a call: the connections have no response timeout of their
    /// own (see `connection.rs`), and this one also bounds a reconnection in progress.
    pub(crate) async fn timed<T>(
        &self,
        fut: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LimiterError> {
        self.timed_for(self.timeout, fut).await
    }

    /// One call to Redis (a command, a script or a pipeline), counted, within `limit`.
    pub(crate) async fn timed_for<T>(
        &self,
        limit: Duration,
        fut: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LimiterError> {
        self.round_trips.inc();
        within(limit, fut).await
    }

    /// One call of the caller's own (a command, a script, a pipeline) on this limiter's
    /// connection, counted and under its timeout, as every call of its own is.
    pub async fn call<T>(
        &self,
        fut: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LimiterError> {
        self.timed(fut).await
    }

    /// `PING`, for readiness.
    pub async fn ping(&self) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        self.timed(redis::cmd("PING").query_async::<String>(&mut conn))
            .await
            .map(|_| ())
    }
}

/// `fut` if it finishes within `limit`, else [`LimiterError::Timeout`].
async fn within<T>(
    limit: Duration,
    fut: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, LimiterError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(LimiterError::Timeout(limit)),
    }
}

/// A Redis URL as it may be shown: without its password.
/// `url` (one node's, a cluster's list, or a sentinel URL) as a message may show it.
pub(crate) fn shown_url(url: &str) -> String {
    if is_sentinel_url(url) {
        return SentinelUrl::parse(url).map_or_else(
            |_| "(an unreadable sentinel URL)".to_owned(),
            |parsed| parsed.shown(),
        );
    }
    url.split(',')
        .map(|u| redacted(u.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => "(an unreadable URL)".to_owned(),
    }
}
