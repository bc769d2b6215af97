//! One Redis node or a Redis Cluster behind one cloneable, multiplexed connection.

use std::time::Duration;

use anyhow::Context;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

#[derive(Clone)]
pub enum RedisConn {
    /// Reconnects by itself; created lazily so the server starts while Redis is down.
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl RedisConn {
    /// `url` is one `redis://` URL, or a comma-separated list of them for a cluster.
    pub async fn connect(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        let urls: Vec<&str> = url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect();
        match urls.as_slice() {
            [] => anyhow::bail!("redis_url is empty"),
            [one] => {
                let client = redis::Client::open(*one).context("invalid redis_url")?;
                let manager =
                    ConnectionManager::new_lazy_with_config(client, manager_config(timeout))
                        .context("cannot set up the redis connection")?;
                Ok(Self::Single(manager))
            }
            many => {
                // No response timeout here: every call is timed by the limiter (one timer).
                let client = ClusterClient::builder(many.iter().copied())
                    .connection_timeout(timeout.max(Duration::from_millis(500)))
                    .build()
                    .context("invalid redis cluster urls")?;
                let conn = client
                    .get_async_connection()
                    .await
                    .context("cannot connect to the redis cluster")?;
                Ok(Self::Cluster(conn))
            }
        }
    }

    /// A single-node connection driven by the calling thread's runtime, made without
    /// waiting; `None` for a cluster URL. Each HTTP worker takes one, so an acquire never
    /// hops to another thread to reach Redis.
    pub fn local(url: &str, timeout: Duration) -> Option<Self> {
        if url.contains(',') {
            return None;
        }
        let client = redis::Client::open(url.trim()).ok()?;
        let manager =
            ConnectionManager::new_lazy_with_config(client, manager_config(timeout)).ok()?;
        Some(Self::Single(manager))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout.max(Duration::from_millis(500))))
        // Every call is timed by the limiter, which also bounds a reconnection: a second
        // timer per call here would only cost time on the hot path.
        .set_response_timeout(None)
        .set_number_of_retries(1)
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}
