//! The live view of an application's policies: each bucket as Redis holds it now and the
//! granted/denied counts of the last minutes, for the console's table and chart.

use serde::Serialize;

use crate::acquire::unix_minute_now;
use crate::auth::Actor;
use crate::domain::PolicyName;
use crate::limiter::{BucketState, MinuteCounts};

use super::{Control, ControlResult, PolicyView};

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

impl Control {
    /// The live state of an application's policies, for those who may see it.
    pub async fn live_policies(&self, actor: &Actor, slug: &str) -> ControlResult<Vec<LivePolicy>> {
        let policies = self.list_policies(actor, Some(slug)).await?;
        Ok(self.live_state_of(&policies).await)
    }

    /// The live state of policies the caller has already been allowed to see (a page that
    /// lists them does not read them from SQL twice). A policy Redis cannot report on
    /// right now has no state, rather than failing the page.
    pub async fn live_state_of(&self, policies: &[PolicyView]) -> Vec<LivePolicy> {
        let now_minute = unix_minute_now();
        let mut live = Vec::with_capacity(policies.len());
        for policy in policies {
            // Views come from stored, validated policies: their names always parse.
            let Ok(name) = PolicyName::parse(&policy.name) else {
                continue;
            };
            let state = match self.limiter.bucket_state(&name).await {
                Ok(state) => state,
                Err(e) => {
                    tracing::warn!(policy = %name, error = %e, "live state unavailable");
                    None
                }
            };
            let activity = self
                .limiter
                .recent_minute_counts(name.as_str(), now_minute, ACTIVITY_MINUTES)
                .await
                .unwrap_or_default();
            let full_in_ms = state.as_ref().map(|s| s.full_in_ms);
            live.push(LivePolicy {
                name: policy.name.clone(),
                state,
                full_in_ms,
                activity,
            });
        }
        live
    }
}
