//! The Redis side: connections, key naming, the Lua scripts and the calls that run them.
//! Nothing here knows about SQL or HTTP.

mod acquire;
mod batch;
mod batch_plan;
mod call;
mod changes;
mod connection;
mod keyed;
mod keys;
mod live;
mod own_buckets;
mod policy_live;
mod release;
pub mod scripts;
mod state;
mod top_keys;
mod usage;
mod writes;

pub use acquire::{AcquireOutcome, Decision, LeaseId};
pub use batch::Batcher;
pub use changes::listen_for_changes;
pub use connection::RedisConn;
pub use keyed::{BucketLimits, KeyedBucket};
pub use keys::{KeySpace, StateKey};
pub use live::LiveView;
pub use own_buckets::OwnBucket;
pub use policy_live::PolicyLive;
pub use release::ReleaseOutcome;
pub use state::BucketState;
pub use top_keys::{CallerCount, TopBatch, TopByOutcome};
pub use usage::{MinuteCounts, PolicyCounts, UsageSpan};
pub use writes::PolicyConfig;

use std::sync::Arc;
use std::time::Duration;

use prometheus::IntCounter;

/// Everything that talks to Redis, with one timeout for every call.
#[derive(Clone)]
pub struct Limiter {
    conn: RedisConn,
    keys: KeySpace,
    timeout: Duration,
    /// Where Redis is, as messages may name it (no password).
    address: Arc<str>,
    /// Calls made (a pipeline is one): what each part of the server asks of Redis.
    round_trips: IntCounter,
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
            address: url
                .split(',')
                .map(|u| redacted(u.trim()))
                .collect::<Vec<_>>()
                .join(",")
                .into(),
            round_trips: IntCounter::new("unregistered", "not exported").expect("a valid name"),
        })
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
    async fn timed<T>(
        &self,
        fut: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LimiterError> {
        self.timed_for(self.timeout, fut).await
    }

    /// One call to Redis (a command, a script or a pipeline), counted, within `limit`.
    async fn timed_for<T>(
        &self,
        limit: Duration,
        fut: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LimiterError> {
        self.round_trips.inc();
        within(limit, fut).await
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
fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        Err(_) => "(an unreadable URL)".to_owned(),
    }
}
