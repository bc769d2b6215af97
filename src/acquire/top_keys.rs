//! Who is being limited: per policy, the callers (keys, or apps) with the most grants and
//! the most denials, counted in bounded memory. Each HTTP worker keeps a small
//! Space-Saving sketch per policy and outcome (at most [`SKETCH_SIZE`] callers; a new
//! caller takes the place of the least counted one, so a heavy hitter is never missed),
//! and the flusher adds them to Redis per minute, where every instance's are summed.
//!
//! A caller that takes another's place inherits its count as a possible error; what is
//! reported is the count minus that error, which the caller certainly reached. So no
//! caller seen once shows a large count because it arrived after many others, and the
//! sums in Redis are lower bounds too (exact while a policy has few callers).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::limiter::Decision;

/// Callers one sketch follows.
pub const SKETCH_SIZE: usize = 32;

/// One followed caller: its count, of which up to `error` may be another's.
#[derive(Debug, Clone, Copy)]
struct Counter {
    count: u64,
    error: u64,
}

/// A Space-Saving sketch: the heavy hitters of a stream in `SKETCH_SIZE` counters.
#[derive(Debug, Default)]
struct Sketch {
    counters: HashMap<Box<str>, Counter>,
}

impl Sketch {
    fn add(&mut self, caller: &str) {
        if let Some(c) = self.counters.get_mut(caller) {
            c.count += 1;
            return;
        }
        if self.counters.len() < SKETCH_SIZE {
            self.counters
                .insert(caller.into(), Counter { count: 1, error: 0 });
            return;
        }
        let (least, floor) = self
            .counters
            .iter()
            .min_by_key(|(_, c)| c.count)
            .map(|(k, c)| (k.clone(), c.count))
            .expect("a full sketch has entries");
        self.counters.remove(&least);
        self.counters.insert(
            caller.into(),
            Counter {
                count: floor + 1,
                error: floor,
            },
        );
    }

    /// Each caller with the count it certainly reached, emptying the sketch.
    fn take(&mut self) -> Vec<(String, u64)> {
        self.counters
            .drain()
            .map(|(caller, c)| (caller.into_string(), c.count - c.error))
            .collect()
    }
}

/// One policy's callers since the last flush, by outcome.
#[derive(Debug, Default)]
struct PolicyTop {
    granted: Sketch,
    denied: Sketch,
    /// Granted by a shadow policy that would have denied them.
    shadow_denied: Sketch,
}

/// The top callers seen by one worker since the last flush.
#[derive(Debug, Default)]
pub struct TopKeys {
    // Locked by its worker for each decision and by the flusher every few seconds: never
    // contended between workers.
    by_policy: Mutex<HashMap<Box<str>, PolicyTop>>,
}

/// What a flush takes of one policy: its top callers by outcome, with counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakenTop {
    pub policy: String,
    pub granted: Vec<(String, u64)>,
    pub denied: Vec<(String, u64)>,
    pub shadow_denied: Vec<(String, u64)>,
}

impl TopKeys {
    pub fn record(&self, policy: &str, caller: &str, decision: Decision) {
        let mut by_policy = self.by_policy.lock().expect("top keys lock");
        let top = match by_policy.get_mut(policy) {
            Some(top) => top,
            None => by_policy.entry(policy.into()).or_default(),
        };
        match decision {
            Decision::Granted | Decision::Unenforced => top.granted.add(caller),
            Decision::Denied => top.denied.add(caller),
            Decision::ShadowDenied => top.shadow_denied.add(caller),
        }
    }

    fn take(&self) -> Vec<TakenTop> {
        let mut by_policy = self.by_policy.lock().expect("top keys lock");
        by_policy
            .drain()
            .map(|(policy, mut top)| TakenTop {
                policy: policy.into_string(),
                granted: top.granted.take(),
                denied: top.denied.take(),
                shadow_denied: top.shadow_denied.take(),
            })
            .collect()
    }
}

/// Every worker's sketches, for the flusher.
#[derive(Debug, Default)]
pub struct TopKeysRegistry {
    workers: Mutex<Vec<Arc<TopKeys>>>,
}

impl TopKeysRegistry {
    /// The sketches of a new worker.
    pub fn for_worker(&self) -> Arc<TopKeys> {
        let top = Arc::new(TopKeys::default());
        self.workers
            .lock()
            .expect("registry lock")
            .push(top.clone());
        top
    }

    /// Takes every worker's sketches, merged per policy.
    pub fn take(&self) -> Vec<TakenTop> {
        let workers = self.workers.lock().expect("registry lock").clone();
        let mut merged: HashMap<String, TakenTop> = HashMap::new();
        for taken in workers.iter().flat_map(|w| w.take()) {
            let entry = merged
                .entry(taken.policy.clone())
                .or_insert_with(|| TakenTop {
                    policy: taken.policy.clone(),
                    ..TakenTop::default()
                });
            entry.granted.extend(taken.granted);
            entry.denied.extend(taken.denied);
            entry.shadow_denied.extend(taken.shadow_denied);
        }
        merged.into_values().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heavy_hitter_is_found_among_a_million_callers_in_bounded_memory() {
        let top = TopKeys::default();
        for i in 0..1_000_000u64 {
            top.record("p", &format!("user-{i}"), Decision::Denied);
            if i % 10 == 0 {
                top.record("p", "the-abuser", Decision::Denied);
            }
        }
        let taken = top.take();
        let denied = &taken[0].denied;
        assert!(denied.len() <= SKETCH_SIZE);
        let (first, count) = denied.iter().max_by_key(|(_, n)| *n).unwrap();
        assert_eq!(first, "the-abuser");
        assert_eq!(*count, 100_000, "followed from its first call, so exact");
        assert!(
            denied.iter().all(|(k, n)| k == "the-abuser" || *n <= 1),
            "a caller seen once is not reported with another's count: {denied:?}"
        );
        assert!(top.take().is_empty(), "taken once");
    }

    #[test]
    fn every_worker_is_taken() {
        let registry = TopKeysRegistry::default();
        let (a, b) = (registry.for_worker(), registry.for_worker());
        a.record("p", "ann", Decision::Granted);
        b.record("p", "bob", Decision::Granted);
        b.record("q", "bob", Decision::ShadowDenied);
        let mut taken = registry.take();
        taken.sort_by(|x, y| x.policy.cmp(&y.policy));
        assert_eq!(taken[0].granted.len(), 2);
        assert_eq!(taken[1].shadow_denied, vec![("bob".to_owned(), 1)]);
        assert!(taken[1].denied.is_empty());
    }
}
