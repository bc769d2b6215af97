//! Telling the other instances that something changed: a Redis pub/sub channel per
//! deployment. A message only says "reconcile now"; the data still comes from SQL, so a
//! lost message costs at most one sync interval, never correctness.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::client::{Limiter, LimiterError};

impl Limiter {
    /// Publishes a change notice signed with this instance's id (so it can skip its own).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn announce_change(&self, instance: &str) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.keys.changes_channel()).arg(instance);
        let fut = cmd.query_async::<i64>(&mut conn);
        self.timed(fut).await.map(|_| ())
    }
}

/// Calls `heard` and wakes `wake` for every change notice of another instance, until
/// `shutdown`: `heard` at once, on this task (what can be done before the change is read
/// from SQL, such as dropping what the change may have made untrue), `wake` for the
/// reconcile that reads it. Connects to the first node of `url` (a cluster propagates
/// PUBLISH to every node), or behind Sentinel to the master it names now (a replica gets
/// the master's PUBLISH too), and after a lost connection reconnects and does both once,
/// since notices may have been missed.
pub async fn listen_for_changes(
    url: String,
    channel: String,
    instance: String,
    wake: Arc<Notify>,
    heard: impl Fn() + Send + 'static,
    shutdown: CancellationToken,
) {
    let first = if crate::client::is_sentinel_url(&url) {
        url.clone()
    } else {
        url.split(',').next().unwrap_or_default().trim().to_owned()
    };
    let shown = crate::client::shown_url(&first);
    let mut connected_before = false;
    while !shutdown.is_cancelled() {
        match subscribe(&first, &channel).await {
            Ok(mut pubsub) => {
                if connected_before {
                    heard();
                    wake.notify_one();
                }
                connected_before = true;
                let mut messages = pubsub.on_message();
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        message = messages.next() => match message {
                            Some(m) => {
                                let from: String = m.get_payload().unwrap_or_default();
                                if from != instance {
                                    heard();
                                    wake.notify_one();
                                }
                            }
                            None => break,
                        },
                    }
                }
                tracing::warn!(redis = %shown, "change notices: connection lost; reconnecting");
            }
            Err(e) => tracing::warn!(
                redis = %shown,
                error = %e,
                "change notices: cannot subscribe; retrying"
            ),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

async fn subscribe(url: &str, channel: &str) -> redis::RedisResult<redis::aio::PubSub> {
    let client = if crate::client::is_sentinel_url(url) {
        let sentinel = crate::client::SentinelUrl::parse(url).map_err(|e| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "bad sentinel URL",
                format!("{e:#}"),
            ))
        })?;
        sentinel.master_client().await?
    } else {
        redis::Client::open(url)?
    };
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub)
}
