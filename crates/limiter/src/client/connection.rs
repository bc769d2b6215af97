//! One Redis node, a Redis Cluster, or the master that Redis Sentinel names, behind one
//! cloneable, multiplexed connection. Each is made lazily, so the server starts (and
//! answers by each policy's failure mode) while Redis is down, and each connects again by
//! itself once it is back (behind Sentinel, to the master after a failover).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use arc_swap::ArcSwapOption;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};

use super::sentinel::{SentinelConn, is_sentinel_url, master_may_have_moved};

#[derive(Clone)]
pub enum RedisConn {
    /// Reconnects by itself (see [`lost_connection`] for the first call after a loss).
    Single(ConnectionManager),
    Cluster(Arc<LazyCluster>),
    /// The master Sentinel names, asked again after a call finds it moved.
    Sentinel(Arc<SentinelConn>),
}

/// A Redis Cluster connection made at first use, and made again at the next use after an
/// attempt failed (the cluster connection itself follows failovers and restarts once made).
pub struct LazyCluster {
    client: ClusterClient,
    /// The runtime that drives the connection: the server's own, never the runtime of the
    /// HTTP worker that happens to call first (it stops with its worker).
    runtime: tokio::runtime::Handle,
    conn: ArcSwapOption<ClusterConnection>,
    /// One connection attempt at a time; the others wait for its result.
    connecting: tokio::sync::Mutex<()>,
}

impl LazyCluster {
    async fn get(&self) -> RedisResult<ClusterConnection> {
        if let Some(conn) = self.conn.load_full() {
            return Ok(ClusterConnection::clone(&conn));
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(conn) = self.conn.load_full() {
            return Ok(ClusterConnection::clone(&conn));
        }
        let client = self.client.clone();
        let conn = self
            .runtime
            .spawn(async move { client.get_async_connection().await })
            .await
            .map_err(|e| {
                RedisError::from((ErrorKind::Io, "cluster connect task failed", e.to_string()))
            })??;
        self.conn.store(Some(Arc::new(conn.clone())));
        Ok(conn)
    }
}

/// Whether a call failed because the connection is gone (Redis restarted, the socket was
/// closed): the connection manager then starts a new one, and the call is worth one more
/// try on it. After a Redis restart the first call on an idle connection fails this way;
/// retried, it is answered instead of failing by the policy's failure mode. (A command
/// whose reply was lost with the connection may have run: retried, an acquire then takes
/// its permits twice, which errs on the side of the limit.)
fn lost_connection(e: &RedisError) -> bool {
    e.is_unrecoverable_error() || e.is_io_error()
}

impl RedisConn {
    /// `url` is one `redis://` URL, a comma-separated list of them for a cluster, or one
    /// `redis+sentinel://` URL. Checks the URLs; connects at the first call.
    pub fn new(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        if is_sentinel_url(url) {
            return Ok(Self::Sentinel(SentinelConn::new(
                url,
                manager_config(timeout),
                search_timeout(timeout),
            )?));
        }
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
                let runtime = tokio::runtime::Handle::try_current()
                    .context("a cluster connection is made inside the server's runtime")?;
                Ok(Self::Cluster(Arc::new(LazyCluster {
                    client,
                    runtime,
                    conn: ArcSwapOption::empty(),
                    connecting: tokio::sync::Mutex::new(()),
                })))
            }
        }
    }

    /// A single-node connection driven by the calling thread's runtime, made without
    /// waiting; `None` for a cluster URL. Each HTTP worker takes one, so an acquire never
    /// hops to another thread to reach Redis.
    pub fn local(url: &str, timeout: Duration) -> Option<Self> {
        if is_sentinel_url(url) {
            let conn = SentinelConn::new(url, manager_config(timeout), search_timeout(timeout));
            return conn.ok().map(Self::Sentinel);
        }
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

/// How long asking the sentinels for the master may take.
fn search_timeout(timeout: Duration) -> Duration {
    timeout.max(Duration::from_millis(500))
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
            Self::Single(c) => Box::pin(async move {
                match c.req_packed_command(cmd).await {
                    Err(e) if lost_connection(&e) => c.req_packed_command(cmd).await,
                    answered => answered,
                }
            }),
            Self::Cluster(lazy) => Box::pin(async move {
                let mut conn = lazy.get().await?;
                conn.req_packed_command(cmd).await
            }),
            Self::Sentinel(sentinel) => Box::pin(async move {
                let (generation, mut conn) = sentinel.get().await?;
                match conn.req_packed_command(cmd).await {
                    Err(e) if master_may_have_moved(&e) => {
                        sentinel.forget(generation);
                        let (_, mut conn) = sentinel.get().await?;
                        conn.req_packed_command(cmd).await
                    }
                    answered => answered,
                }
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => Box::pin(async move {
                match c.req_packed_commands(pipeline, offset, count).await {
                    Err(e) if lost_connection(&e) => {
                        c.req_packed_commands(pipeline, offset, count).await
                    }
                    answered => answered,
                }
            }),
            Self::Cluster(lazy) => Box::pin(async move {
                let mut conn = lazy.get().await?;
                conn.req_packed_commands(pipeline, offset, count).await
            }),
            Self::Sentinel(sentinel) => Box::pin(async move {
                let (generation, mut conn) = sentinel.get().await?;
                match conn.req_packed_commands(pipeline, offset, count).await {
                    Err(e) if master_may_have_moved(&e) => {
                        sentinel.forget(generation);
                        let (_, mut conn) = sentinel.get().await?;
                        conn.req_packed_commands(pipeline, offset, count).await
                    }
                    answered => answered,
                }
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(_) | Self::Sentinel(_) => 0,
        }
    }
}
