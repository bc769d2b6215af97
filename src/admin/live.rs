//! The live view of an application's policies: each bucket as Redis holds it now and the
//! granted/denied counts of the last minutes, for the console's table and chart.

use serde::Serialize;

use crate::activity::unix_minute_now;
use crate::auth::{Actor, Permission};
use crate::limiter::{BucketState, MinuteCounts};

use super::{Admin, AdminResult, authorised_app};

/// How many minutes of counts the chart shows.
pub const ACTIVITY_MINUTES: i64 = 10;

#[derive(Debug, Clone, Serialize)]
pub struct LivePolicy {
    pub name: String,
    /// `None` when Redis does not hold the policy right now (the next sync pass restores
    /// it) or cannot be reached.
    pub state: Option<BucketState>,
    /// Milliseconds until the bucket is full again.
    pub full_in_ms: Option<i64>,
    pub activity: Vec<MinuteCounts>,
}

impl Admin {
    pub async fn live_policies(&self, actor: &Actor, slug: &str) -> AdminResult<Vec<LivePolicy>> {
        let mut tx = self.store.begin_read().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::View).await?;
        let records = tx.list_policies(Some(&app.id)).await?;
        tx.commit().await?;
        let now_minute = unix_minute_now();
        let mut live = Vec::with_capacity(records.len());
        for record in records {
            let name = &record.spec.name;
            let state = match self.limiter.bucket_state(name).await {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!(policy = %name, error = %e, "live state unavailable");
                    None
                }
            };
            let activity = self
                .limiter
                .recent_activity(name.as_str(), now_minute, ACTIVITY_MINUTES)
                .await
                .unwrap_or_default();
            let full_in_ms = state.as_ref().map(|s| s.full_in_ms);
            live.push(LivePolicy {
                name: name.to_string(),
                state,
                full_in_ms,
                activity,
            });
        }
        Ok(live)
    }
}
