//! What each HTTP worker counts of its decisions, per policy: how many by outcome (the
//! console's charts) and who is being limited, the callers (keys, or apps) with the most
//! grants and the most denials, in bounded memory. A worker records into its own tally
//! under its own lock, which only the flusher also takes, every couple of seconds: the
//! grant path shares no lock with the other workers. The flusher adds the tallies to Redis
//! per minute, where every instance's are summed. A worker's table holds at most
//! [`MAX_TALLIED_POLICIES`] policies: a full one goes to the flusher at once.
//!
//! The top callers are a small Space-Saving sketch per policy and outcome (at most
//! [`SKETCH_SIZE`] callers; a new caller takes the place of the least counted one, so a
//! heavy hitter is never missed).
//!
//! A caller that takes another's place inherits its count as a possible error; what is
//! reported is the count minus that error, which the caller certainly reached. So no
//! caller seen once shows a large count because it arrived after many others, and the
//! sums in Redis are lower bounds too (exact while a policy has few callers).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use ratekeeper_limiter::Decision;

use crate::snapshot::InlineName;

/// Callers one sketch follows.
pub const SKETCH_SIZE: usize = 32;

/// One followed caller: its count, of which up to `error` may be another's.
#[derive(Debug, Clone, Copy)]
struct Counter {
    count: u64,
    error: u64,
}

/// A Space-Saving sketch: the heavy hitters of a stream in `SKETCH_SIZE` counters, a short
/// list searched in order. Most policies see one or two callers between flushes (an
/// application), and a worker holds a sketch for every policy it decided since the last
/// flush: a hash table each would cost several times the callers it holds. Callers are
/// held in place (`InlineName`), so a search reads the list alone.
#[derive(Debug, Default)]
struct Sketch {
    counters: Vec<(InlineName, Counter)>,
}

impl Sketch {
    fn add(&mut self, caller: &str) {
        let wanted = caller.as_bytes();
        if let Some((_, c)) = self
            .counters
            .iter_mut()
            .find(|(k, _)| k.as_bytes() == wanted)
        {
            c.count += 1;
            return;
        }
        if self.counters.len() < SKETCH_SIZE {
            // The first caller alone: a policy often has no other.
            if self.counters.capacity() == 0 {
                self.counters.reserve_exact(1);
            }
            self.counters
                .push((InlineName::new(caller), Counter { count: 1, error: 0 }));
            return;
        }
        let least = self
            .counters
            .iter_mut()
            .min_by_key(|(_, c)| c.count)
            .expect("a full sketch has entries");
        let floor = least.1.count;
        *least = (
            InlineName::new(caller),
            Counter {
                count: floor + 1,
                error: floor,
            },
        );
    }

    /// Another worker's sketch of the same policy beside this one's: the flush adds each
    /// caller's counts in Redis, so a caller both followed is reported twice, each time
    /// with what that worker saw.
    fn append(&mut self, other: Sketch) {
        self.counters.reserve_exact(other.counters.len());
        self.counters.extend(other.counters);
    }

    /// Each caller with the count it certainly reached.
    fn into_callers(self) -> Vec<(String, u64)> {
        self.counters
            .into_iter()
            .map(|(caller, c)| (caller.as_str().to_owned(), c.count - c.error))
            .collect()
    }
}

/// One policy's decisions since the last flush: counts and callers, by outcome.
#[derive(Debug, Default)]
struct PolicyTally {
    counts: OutcomeCounts,
    granted: Sketch,
    /// Most policies refuse no one between two flushes: their tally holds no room for it.
    refused: Option<Box<RefusedCallers>>,
}

#[derive(Debug, Default)]
struct RefusedCallers {
    denied: Sketch,
    /// Granted by a shadow policy that would have denied them.
    shadow_denied: Sketch,
}

/// Decisions of one policy by outcome. Unenforced grants count as grants; a shadow
/// policy's would-be denials apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutcomeCounts {
    pub granted: u64,
    pub denied: u64,
    pub shadow_denied: u64,
    /// Refused (503) because Redis could not be reached by a fail-closed policy.
    pub unavailable: u64,
}

impl OutcomeCounts {
    fn add(&mut self, decision: Decision) {
        match decision {
            Decision::Granted | Decision::Unenforced => self.granted += 1,
            Decision::Denied | Decision::Blocked => self.denied += 1,
            Decision::ShadowDenied => self.shadow_denied += 1,
        }
    }

    pub(super) fn merge(&mut self, other: OutcomeCounts) {
        self.granted += other.granted;
        self.denied += other.denied;
        self.shadow_denied += other.shadow_denied;
        self.unavailable += other.unavailable;
    }
}

/// The most policies a worker's table holds: one more and the table goes to the flusher at
/// once (`Tally::handed_over`), not at its next tick. So a tally's memory is bounded however
/// many policies are decided between two ticks (100,000 policies decided in 2 s would
/// otherwise be about 15 MB per worker, and as much again while the flusher lists them).
/// 14,336 is 7/8 of 16,384: the most a table of 16,384 buckets holds before it doubles.
pub const MAX_TALLIED_POLICIES: usize = 14_336;

/// Keyed by the name in place: a worker finds its policy's tally without reading the name
/// from elsewhere (`InlineName`).
type PolicyTable = HashMap<InlineName, PolicyTally>;

/// What one worker decided since the last flush.
#[derive(Debug, Default)]
pub struct Tally {
    // Locked by its worker for each decision and by the flusher every few seconds: never
    // contended between workers.
    by_policy: Mutex<PolicyTable>,
    /// Full tables waiting for the flusher, which `flush_now` wakes.
    handed_over: Mutex<Vec<PolicyTable>>,
    flush_now: Arc<Notify>,
    /// Refusals no policy saw, per calling application: by application, never by the
    /// name asked for, which any client could make up without end.
    app_refusals: Mutex<HashMap<Box<str>, AppRefusals>>,
}

/// An application's acquires refused before any policy decided them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppRefusals {
    /// Named no policy (404).
    pub unknown_policy: u64,
    /// Sent a revoked or expired key of the application (401).
    pub unauthenticated: u64,
}

/// What a flush takes of one policy: its counts, and its top callers by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Taken {
    pub policy: String,
    pub counts: OutcomeCounts,
    pub granted: Vec<(String, u64)>,
    pub denied: Vec<(String, u64)>,
    pub shadow_denied: Vec<(String, u64)>,
}

impl Tally {
    /// A decision on `policy` for `caller`: counted, and the caller followed.
    pub fn record(&self, policy: &str, caller: &str, decision: Decision) {
        self.with_policy(policy, |top| {
            top.counts.add(decision);
            match decision {
                Decision::Granted | Decision::Unenforced => top.granted.add(caller),
                Decision::Denied | Decision::Blocked => top.refused().denied.add(caller),
                Decision::ShadowDenied => top.refused().shadow_denied.add(caller),
            }
        });
    }

    /// A decision counted without its caller (granted without Redis, failing open).
    pub fn count(&self, policy: &str, decision: Decision) {
        self.with_policy(policy, |top| top.counts.add(decision));
    }

    /// An acquire by `app` that named no policy.
    pub fn count_unknown_policy(&self, app: &str) {
        self.with_app(app, |r| r.unknown_policy += 1);
    }

    /// An acquire with a revoked or expired key of `app`.
    pub fn count_unauthenticated(&self, app: &str) {
        self.with_app(app, |r| r.unauthenticated += 1);
    }

    fn with_app(&self, app: &str, count: impl FnOnce(&mut AppRefusals)) {
        let mut by_app = self.app_refusals.lock().expect("tally lock");
        match by_app.get_mut(app) {
            Some(r) => count(r),
            None => {
                let mut r = AppRefusals::default();
                count(&mut r);
                by_app.insert(app.into(), r);
            }
        }
    }

    /// An acquire of `policy` refused because Redis could not be reached (no caller is
    /// followed: nothing was decided about it).
    pub fn count_unavailable(&self, policy: &str) {
        self.with_policy(policy, |top| top.counts.unavailable += 1);
    }

    fn with_policy(&self, policy: &str, f: impl FnOnce(&mut PolicyTally)) {
        let mut by_policy = self.by_policy.lock().expect("tally lock");
        let top = match by_policy.get_mut(policy.as_bytes()) {
            Some(top) => top,
            None => {
                if by_policy.len() >= MAX_TALLIED_POLICIES {
                    let full = std::mem::take(&mut *by_policy);
                    self.handed_over.lock().expect("tally lock").push(full);
                    self.flush_now.notify_one();
                }
                by_policy.entry(InlineName::new(policy)).or_default()
            }
        };
        f(top);
    }

    /// Takes what was recorded since the last call. A policy with nothing since goes (it
    /// is back at its next decision), so memory follows the policies in use: the table
    /// goes too (a drained one would keep its size of the busiest interval).
    fn take(&self) -> Vec<PolicyTable> {
        let mut tables = std::mem::take(&mut *self.handed_over.lock().expect("tally lock"));
        tables.push(std::mem::take(
            &mut *self.by_policy.lock().expect("tally lock"),
        ));
        tables
    }
}

impl PolicyTally {
    fn refused(&mut self) -> &mut RefusedCallers {
        self.refused.get_or_insert_default()
    }

    fn append(&mut self, other: PolicyTally) {
        self.counts.merge(other.counts);
        self.granted.append(other.granted);
        if let Some(other) = other.refused {
            let refused = self.refused();
            refused.denied.append(other.denied);
            refused.shadow_denied.append(other.shadow_denied);
        }
    }

    fn into_taken(self, policy: InlineName) -> Taken {
        let refused = self.refused.map(|r| *r).unwrap_or_default();
        Taken {
            policy: policy.as_str().to_owned(),
            counts: self.counts,
            granted: self.granted.into_callers(),
            denied: refused.denied.into_callers(),
            shadow_denied: refused.shadow_denied.into_callers(),
        }
    }
}

/// Every worker's tally, for the flusher.
#[derive(Debug, Default)]
pub struct TallyRegistry {
    workers: Mutex<Vec<Arc<Tally>>>,
    /// Woken by a worker that handed a full table over.
    flush_now: Arc<Notify>,
}

impl TallyRegistry {
    /// The tally of a new worker.
    pub fn for_worker(&self) -> Arc<Tally> {
        let top = Arc::new(Tally {
            flush_now: self.flush_now.clone(),
            ..Tally::default()
        });
        self.workers
            .lock()
            .expect("registry lock")
            .push(top.clone());
        top
    }

    /// Completes when a worker handed a full table over since the last flush took it (at
    /// once if it did meanwhile).
    pub async fn flush_wanted(&self) {
        self.flush_now.notified().await;
    }

    /// Takes every worker's refusals no policy saw, summed per application.
    pub fn take_app_refusals(&self) -> HashMap<String, AppRefusals> {
        let workers = self.workers.lock().expect("registry lock").clone();
        let mut merged: HashMap<String, AppRefusals> = HashMap::new();
        for worker in &workers {
            let taken = std::mem::take(&mut *worker.app_refusals.lock().expect("tally lock"));
            for (app, r) in taken {
                let sum = merged.entry(app.into_string()).or_default();
                sum.unknown_policy += r.unknown_policy;
                sum.unauthenticated += r.unauthenticated;
            }
        }
        merged
    }

    /// Takes every worker's tally, merged per policy: into the biggest of the tables, so
    /// that a flush holds no more than the tables and its list.
    pub fn take(&self) -> Vec<Taken> {
        let workers = self.workers.lock().expect("registry lock").clone();
        let mut tables: Vec<_> = workers.iter().flat_map(|w| w.take()).collect();
        tables.sort_by_key(HashMap::len);
        let Some(mut merged) = tables.pop() else {
            return Vec::new();
        };
        for (policy, top) in tables.into_iter().flatten() {
            match merged.get_mut(&policy) {
                Some(into) => into.append(top),
                None => {
                    merged.insert(policy, top);
                }
            }
        }
        merged
            .into_iter()
            .map(|(policy, top)| top.into_taken(policy))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    #[test]
    fn a_heavy_hitter_is_found_among_a_million_callers_in_bounded_memory() {
        let top = Tally::default();
        for i in 0..1_000_000u64 {
            top.record("p", &format!("user-{i}"), Decision::Denied);
            if i % 10 == 0 {
                top.record("p", "the-abuser", Decision::Denied);
            }
        }
        let taken = top
            .take()
            .pop()
            .and_then(|mut table| table.remove("p".as_bytes()))
            .expect("p tallied")
            .into_taken(InlineName::new("p"));
        let denied = &taken.denied;
        assert!(denied.len() <= SKETCH_SIZE);
        let (first, count) = denied.iter().max_by_key(|(_, n)| *n).unwrap();
        assert_eq!(first, "the-abuser");
        assert_eq!(*count, 100_000, "followed from its first call, so exact");
        assert!(
            denied.iter().all(|(k, n)| k == "the-abuser" || *n <= 1),
            "a caller seen once is not reported with another's count: {denied:?}"
        );
        assert!(top.take().iter().all(HashMap::is_empty), "taken once");
    }

    #[test]
    fn a_full_table_goes_to_the_flusher_at_once_and_nothing_is_lost() {
        let registry = TallyRegistry::default();
        let worker = registry.for_worker();
        let policies = MAX_TALLIED_POLICIES * 2 + 1;
        for i in 0..policies {
            worker.record(&format!("p{i}"), "app", Decision::Granted);
        }
        worker.record("p0", "app", Decision::Denied);
        assert!(
            registry.flush_wanted().now_or_never().is_some(),
            "the flusher is woken"
        );
        assert!(
            worker.by_policy.lock().unwrap().len() <= MAX_TALLIED_POLICIES,
            "the worker's table stays within its bound"
        );
        let taken = registry.take();
        assert_eq!(taken.len(), policies, "every policy, once");
        let p0 = taken.iter().find(|t| t.policy == "p0").unwrap();
        assert_eq!((p0.counts.granted, p0.counts.denied), (1, 1));
        assert_eq!(p0.granted, vec![("app".to_owned(), 1)]);
        assert_eq!(p0.denied, vec![("app".to_owned(), 1)]);
        assert!(registry.take().is_empty(), "taken once");
    }

    #[test]
    fn every_worker_is_taken() {
        let registry = TallyRegistry::default();
        let (a, b) = (registry.for_worker(), registry.for_worker());
        a.record("p", "ann", Decision::Granted);
        b.record("p", "bob", Decision::Unenforced);
        b.record("p", "bob", Decision::Denied);
        b.record("q", "bob", Decision::ShadowDenied);
        a.count("q", Decision::Granted);
        let mut taken = registry.take();
        taken.sort_by(|x, y| x.policy.cmp(&y.policy));
        assert_eq!(taken[0].granted.len(), 2);
        assert_eq!(
            (taken[0].counts.granted, taken[0].counts.denied),
            (2, 1),
            "an unenforced grant counts as a grant"
        );
        assert_eq!(taken[1].shadow_denied, vec![("bob".to_owned(), 1)]);
        assert!(taken[1].denied.is_empty());
        assert_eq!(
            taken[1].counts,
            OutcomeCounts {
                granted: 1,
                denied: 0,
                shadow_denied: 1,
                unavailable: 0,
            },
            "a count without a caller is counted, not followed"
        );
        assert!(registry.take().is_empty(), "taken once");
    }
}
