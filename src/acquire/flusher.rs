//! The workers' tallies (decision counts and top callers per policy, see `tally.rs`)
//! added to Redis every couple of seconds (a quiet policy among many, within 10 s: see
//! `held_counts.rs`), off the hot path, where the console reads the sum over all instances
//! per minute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::IntGauge;
use tokio_util::sync::CancellationToken;

use crate::snapshot::Snapshot;
use ratekeeper_limiter::{AppFlush, Limiter, PolicyFlush, TopBatch};

use super::held_counts::HeldCounts;
use super::{AppRefusals, Taken, TallyRegistry};

/// The policies that denied since the webhook watcher last looked, with how many, as the
/// flusher takes them from the tallies (the watcher turns them into episodes).
#[derive(Debug, Default)]
pub struct FlushedDenials {
    denied: Mutex<HashMap<String, u64>>,
}

/// Policies whose denials are held for the watcher at most (a watcher that stopped
/// taking them must not make this grow without end).
const DENIALS_HELD: usize = 100_000;

impl FlushedDenials {
    fn add(&self, taken: &[Taken]) {
        let mut denied = self.denied.lock().expect("denials lock");
        for t in taken.iter().filter(|t| t.counts.denied > 0) {
            if denied.len() >= DENIALS_HELD && !denied.contains_key(&t.policy) {
                continue;
            }
            *denied.entry(t.policy.clone()).or_default() += t.counts.denied;
        }
    }

    /// What was held, emptied.
    pub fn take(&self) -> HashMap<String, u64> {
        std::mem::take(&mut *self.denied.lock().expect("denials lock"))
    }

    /// Denials taken but not passed on (Redis did not answer): held again for the next.
    pub fn put_back(&self, taken: HashMap<String, u64>) {
        let mut denied = self.denied.lock().expect("denials lock");
        for (policy, n) in taken {
            if denied.len() < DENIALS_HELD || denied.contains_key(&policy) {
                *denied.entry(policy).or_default() += n;
            }
        }
    }
}

/// How often an instance adds its counts to Redis.
const FLUSH_EVERY: Duration = Duration::from_secs(2);

/// The most policies whose counts (or top callers) go in one pipeline.
const FLUSH_CHUNK: usize = 1000;

pub fn unix_minute_now() -> i64 {
    chrono::Utc::now().timestamp_millis() / 60_000
}

/// The counts of `taken` summed per owning application (`snapshot` knows the owners; a
/// policy deleted meanwhile counts for none). A shadow policy's would-be denials were
/// granted: they count as grants of the application, which denied no one, and apart.
fn per_app(
    taken: &[Taken],
    refusals: HashMap<String, AppRefusals>,
    snapshot: &Snapshot,
) -> Vec<AppFlush> {
    let mut apps: HashMap<String, AppFlush> = HashMap::new();
    let blank = |app: String| AppFlush {
        app,
        granted: 0,
        denied: 0,
        shadow_denied: 0,
        unavailable: 0,
        unknown_policy: 0,
        unauthenticated: 0,
    };
    for (app, r) in refusals {
        let sums = apps.entry(app.clone()).or_insert_with(|| blank(app));
        sums.unknown_policy += r.unknown_policy;
        sums.unauthenticated += r.unauthenticated;
    }
    for t in taken {
        if let Some(entry) = snapshot.policy(&t.policy) {
            let app = entry.owner_app.to_string();
            let sums = apps.entry(app.clone()).or_insert_with(|| blank(app));
            sums.granted += t.counts.granted + t.counts.shadow_denied;
            sums.denied += t.counts.denied;
            sums.shadow_denied += t.counts.shadow_denied;
            sums.unavailable += t.counts.unavailable;
        }
    }
    apps.into_values().collect()
}

/// Policies whose refusals are held at most (an outage long and wide enough to reach it
/// loses the rest, logged).
const HELD_POLICIES: usize = 10_000;

/// The refusals of a flush that failed, kept for the next.
fn hold_refusals(chunk: &[Taken], held: &mut HashMap<String, u64>) {
    for t in chunk.iter().filter(|t| t.counts.unavailable > 0) {
        if held.len() >= HELD_POLICIES && !held.contains_key(&t.policy) {
            tracing::warn!(policy = %t.policy, "refusals not stored: too many policies held");
            continue;
        }
        *held.entry(t.policy.clone()).or_default() += t.counts.unavailable;
    }
}

/// The held refusals added to what this flush took.
fn add_held(taken: &mut Vec<Taken>, held: &mut HashMap<String, u64>) {
    if held.is_empty() {
        return;
    }
    let at: HashMap<String, usize> = taken
        .iter()
        .enumerate()
        .map(|(i, t)| (t.policy.clone(), i))
        .collect();
    for (policy, n) in held.drain() {
        match at.get(&policy) {
            Some(&i) => taken[i].counts.unavailable += n,
            None => {
                let mut t = Taken {
                    policy,
                    ..Taken::default()
                };
                t.counts.unavailable = n;
                taken.push(t);
            }
        }
    }
}

/// Adds the counts and the top callers to Redis every [`FLUSH_EVERY`] (sooner when a
/// worker's table is full) until `shutdown`, then once more. Among many policies, quiet
/// ones' counts wait a few flushes (`held_counts.rs`).
pub async fn run_flusher(
    tallies: Arc<TallyRegistry>,
    limiter: Limiter,
    snapshot: Arc<Snapshot>,
    denials: Arc<FlushedDenials>,
    held_gauge: IntGauge,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(FLUSH_EVERY);
    // Refusals for want of Redis happen while Redis is away, when their flush fails too:
    // they are held for the next flush that reaches it (and counted in its minute),
    // rather than lost like a chart's other counts.
    let mut refusals: HashMap<String, u64> = HashMap::new();
    let mut held = HeldCounts::default();
    loop {
        let stopping = tokio::select! {
            _ = ticker.tick() => false,
            // A worker's table is full (`MAX_TALLIED_POLICIES`): flushed now, so that its
            // memory is bounded whatever the rate.
            () = tallies.flush_wanted() => false,
            () = shutdown.cancelled() => true,
        };
        let minute = unix_minute_now();
        let mut taken = tallies.take();
        denials.add(&taken);
        add_held(&mut taken, &mut refusals);
        // The applications' pairs are few: written at every flush, whatever waits.
        let apps = per_app(&taken, tallies.take_app_refusals(), &snapshot);
        let due = held.due(minute, taken, stopping);
        held_gauge.set(i64::try_from(held.policies()).unwrap_or(i64::MAX));
        if let Some((ended, counts)) = due.ended {
            write(&limiter, ended, &counts, &[], &mut refusals).await;
        }
        write(&limiter, minute, &due.now, &apps, &mut refusals).await;
        if stopping {
            return;
        }
    }
}

/// Writes `taken`'s counts to `minute`, and `apps`' pairs with them; a refusal not written
/// is kept in `refusals` for the next flush.
async fn write(
    limiter: &Limiter,
    minute: i64,
    taken: &[Taken],
    apps: &[AppFlush],
    refusals: &mut HashMap<String, u64>,
) {
    // Applications with nothing but acquires that named no policy: no policy chunk
    // carries them.
    if taken.is_empty()
        && !apps.is_empty()
        && let Err(e) = limiter.add_flush(minute, &[], apps).await
    {
        tracing::warn!(error = %e, apps = apps.len(), "decision counts not stored");
    }
    // A pipeline per FLUSH_CHUNK policies: its commands are built in memory before they
    // are sent, and 10,000 busy policies in one pipeline took some 30 MB every flush.
    for (i, chunk) in taken.chunks(FLUSH_CHUNK).enumerate() {
        let apps = if i == 0 { apps } else { &[] };
        let policies: Vec<PolicyFlush<'_>> = chunk
            .iter()
            .map(|t| PolicyFlush {
                granted: t.counts.granted,
                denied: t.counts.denied,
                shadow_denied: t.counts.shadow_denied,
                unavailable: t.counts.unavailable,
                top: TopBatch {
                    policy: &t.policy,
                    granted: &t.granted,
                    denied: &t.denied,
                    shadow_denied: &t.shadow_denied,
                },
            })
            .collect();
        if let Err(e) = limiter.add_flush(minute, &policies, apps).await {
            // Lost counts only make a chart lower; the decisions themselves were right.
            tracing::warn!(error = %e, policies = chunk.len(), "decision counts not stored");
            hold_refusals(chunk, refusals);
        }
    }
}
