//! Counts of granted, denied and shadow-denied acquires per policy, kept in memory by each instance and
//! added to Redis every couple of seconds (off the hot path: an acquire only bumps an
//! atomic), where the console reads the sum over all instances per minute.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use dashmap::DashMap;
use tokio_util::sync::CancellationToken;

use crate::limiter::{Decision, Limiter, PolicyCounts, TopBatch};
use crate::snapshot::Snapshot;

use super::TopKeysRegistry;

/// How often an instance adds its counts to Redis.
const FLUSH_EVERY: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Counts {
    granted: AtomicU64,
    denied: AtomicU64,
    shadow_denied: AtomicU64,
}

#[derive(Default)]
pub struct DecisionCounts {
    by_policy: DashMap<String, Counts>,
}

impl DecisionCounts {
    pub fn record(&self, policy: &str, decision: Decision) {
        let bump = |c: &Counts| {
            let counter = match decision {
                Decision::Granted | Decision::Unenforced => &c.granted,
                Decision::Denied => &c.denied,
                Decision::ShadowDenied => &c.shadow_denied,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        };
        if let Some(counts) = self.by_policy.get(policy) {
            bump(&counts);
            return;
        }
        bump(&self.by_policy.entry(policy.to_owned()).or_default());
    }

    /// Takes the counts gathered since the last call, per policy. A
    /// policy with nothing to take goes (it is back at its next decision), so memory
    /// follows the policies in use, not every policy ever used.
    pub fn take(&self) -> Vec<PolicyCounts> {
        let mut taken = Vec::new();
        // A record() holds its entry's shard while counting, and retain() takes the shard
        // to look: a count is either taken here or lands in an entry that stays.
        self.by_policy.retain(|policy, counts| {
            let taken_now = PolicyCounts {
                policy: policy.clone(),
                granted: counts.granted.swap(0, Ordering::Relaxed),
                denied: counts.denied.swap(0, Ordering::Relaxed),
                shadow_denied: counts.shadow_denied.swap(0, Ordering::Relaxed),
            };
            let used = taken_now.granted + taken_now.denied + taken_now.shadow_denied > 0;
            if used {
                taken.push(taken_now);
            }
            used
        });
        taken
    }

    /// How many policies have counts in memory.
    pub fn tracked(&self) -> usize {
        self.by_policy.len()
    }
}

pub fn unix_minute_now() -> i64 {
    chrono::Utc::now().timestamp_millis() / 60_000
}

/// The counts of `taken` summed per owning application (`snapshot` knows the owners; a
/// policy deleted meanwhile counts for none). A shadow policy's would-be denials were
/// granted: they count as grants of the application, which denied no one.
fn per_app(taken: &[PolicyCounts], snapshot: &Snapshot) -> Vec<(String, u64, u64)> {
    let mut apps: HashMap<String, (u64, u64)> = HashMap::new();
    for counts in taken {
        if let Some(entry) = snapshot.policy(&counts.policy) {
            let sums = apps.entry(entry.owner_app.to_string()).or_default();
            sums.0 += counts.granted + counts.shadow_denied;
            sums.1 += counts.denied;
        }
    }
    apps.into_iter().map(|(app, (g, d))| (app, g, d)).collect()
}

/// Adds the counts and the top callers to Redis every [`FLUSH_EVERY`] until `shutdown`,
/// then once more.
pub async fn run_flusher(
    counts: Arc<DecisionCounts>,
    top: Arc<TopKeysRegistry>,
    limiter: Limiter,
    snapshot: Arc<Snapshot>,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(FLUSH_EVERY);
    loop {
        let stopping = tokio::select! {
            _ = ticker.tick() => false,
            () = shutdown.cancelled() => true,
        };
        let minute = unix_minute_now();
        let taken = counts.take();
        let apps = per_app(&taken, &snapshot);
        if let Err(e) = limiter.add_minute_counts(minute, &taken, &apps).await {
            // Lost counts only make a chart lower; the decisions themselves were right.
            tracing::warn!(error = %e, policies = taken.len(), "decision counts not stored");
        }
        let tops = top.take();
        let batches: Vec<TopBatch<'_>> = tops
            .iter()
            .map(|t| TopBatch {
                policy: &t.policy,
                granted: &t.granted,
                denied: &t.denied,
                shadow_denied: &t.shadow_denied,
            })
            .collect();
        if let Err(e) = limiter.add_top(minute, &batches).await {
            tracing::warn!(error = %e, policies = tops.len(), "top callers not stored");
        }
        if stopping {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_taken_once() {
        let counts = DecisionCounts::default();
        counts.record("a", Decision::Granted);
        counts.record("a", Decision::Unenforced);
        counts.record("a", Decision::Denied);
        counts.record("b", Decision::ShadowDenied);
        let mut taken: Vec<_> = counts
            .take()
            .into_iter()
            .map(|c| (c.policy, c.granted, c.denied, c.shadow_denied))
            .collect();
        taken.sort();
        assert_eq!(taken, vec![("a".into(), 2, 1, 0), ("b".into(), 0, 0, 1)]);
        assert!(counts.take().is_empty());
    }
}
