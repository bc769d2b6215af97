//! The denial cache: after the server denied `permits` of a resource for a key, calls for
//! at least as many permits are answered here until the denial's `retry_after_ms` has
//! passed, without a request (the server would deny them anyway: a flood of retries
//! costs it nothing). A grant, a refund or a release for that resource and key drops
//! the entry. Bounded: when full, expired entries go first, then the oldest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::decision::{Decision, RateLimitHeaders};

type Key = (String, Option<String>);

struct Entry {
    permits: i64,
    until: Instant,
    limit: Option<i64>,
    policy_version: Option<i64>,
    headers: RateLimitHeaders,
    /// Insertion order, for evicting the oldest.
    seq: u64,
}

/// A bounded map of denials by (resource, key), each until its retry time.
pub(crate) struct DenialCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    seq: u64,
}

/// A check (0 permits) asks whether one permit would be granted: it counts as 1.
fn asked(permits: i64) -> i64 {
    permits.max(1)
}

impl DenialCache {
    /// A cache of at most `capacity` denials; 0 turns it off.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// How many denials it may hold (0: off).
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves a map that is still whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The remembered denial answering a call for `permits` of (resource, key) now, if any.
    pub(crate) fn lookup(
        &self,
        resource: &str,
        key: Option<&str>,
        permits: i64,
    ) -> Option<Decision> {
        self.lookup_at(resource, key, permits, Instant::now())
    }

    fn lookup_at(
        &self,
        resource: &str,
        key: Option<&str>,
        permits: i64,
        now: Instant,
    ) -> Option<Decision> {
        if self.capacity == 0 {
            return None;
        }
        let mut inner = self.lock();
        let map_key = (resource.to_owned(), key.map(str::to_owned));
        let entry = inner.entries.get(&map_key)?;
        if entry.until <= now {
            inner.entries.remove(&map_key);
            return None;
        }
        if asked(permits) < entry.permits {
            return None;
        }
        let left = entry.until - now;
        // Whole milliseconds, rounded up: never 0 while the denial stands.
        let retry_after_ms = left.as_micros().div_ceil(1000).max(1) as i64;
        let mut headers = entry.headers.clone();
        let seconds = (retry_after_ms as u64).div_ceil(1000);
        headers.retry_after = Some(seconds.to_string());
        if let Some(value) = &headers.ratelimit {
            headers.ratelimit = Some(with_reset(value, seconds));
        }
        Some(Decision {
            allowed: false,
            remaining: Some(0),
            limit: entry.limit,
            retry_after_ms: Some(retry_after_ms),
            reset_after_ms: None,
            degraded: false,
            cached: true,
            policy_version: entry.policy_version,
            enforced: true,
            shadow_denied: false,
            lease_id: None,
            headers,
        })
    }

    /// Learns from the server's decision for `permits` of (resource, key): a denial with
    /// a retry time is remembered, a grant forgets.
    pub(crate) fn record(
        &self,
        resource: &str,
        key: Option<&str>,
        permits: i64,
        decision: &Decision,
    ) {
        self.record_at(resource, key, permits, decision, Instant::now());
    }

    fn record_at(
        &self,
        resource: &str,
        key: Option<&str>,
        permits: i64,
        decision: &Decision,
        now: Instant,
    ) {
        if self.capacity == 0 || decision.degraded || decision.cached {
            return;
        }
        if decision.allowed {
            self.forget(resource, key);
            return;
        }
        let retry_after_ms = decision.retry_after_ms.unwrap_or(0);
        if retry_after_ms <= 0 {
            return;
        }
        let mut inner = self.lock();
        let map_key = (resource.to_owned(), key.map(str::to_owned));
        if !inner.entries.contains_key(&map_key) && inner.entries.len() >= self.capacity {
            inner.entries.retain(|_, e| e.until > now);
            if inner.entries.len() >= self.capacity
                && let Some(oldest) = inner
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.seq)
                    .map(|(k, _)| k.clone())
            {
                inner.entries.remove(&oldest);
            }
        }
        inner.seq += 1;
        let seq = inner.seq;
        inner.entries.insert(
            map_key,
            Entry {
                permits: asked(permits),
                until: now + Duration::from_millis(retry_after_ms as u64),
                limit: decision.limit,
                policy_version: decision.policy_version,
                headers: decision.headers.clone(),
                seq,
            },
        );
    }

    /// Drops the denial of (resource, key): permits were given back, or granted.
    pub(crate) fn forget(&self, resource: &str, key: Option<&str>) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.lock();
        if inner.entries.is_empty() {
            return;
        }
        inner
            .entries
            .remove(&(resource.to_owned(), key.map(str::to_owned)));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().entries.len()
    }
}

/// A `RateLimit` header's value with its `t` (seconds to reset) replaced, so that a
/// remembered denial's header tells the time left, not the time it had.
fn with_reset(value: &str, seconds: u64) -> String {
    value
        .split(';')
        .map(|part| {
            if part.trim_start().starts_with("t=") {
                format!("t={seconds}")
            } else if part.trim_start().starts_with("r=") {
                "r=0".to_owned()
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(retry_after_ms: i64) -> Decision {
        Decision {
            allowed: false,
            remaining: Some(0),
            limit: Some(5),
            retry_after_ms: Some(retry_after_ms),
            reset_after_ms: Some(retry_after_ms),
            enforced: true,
            policy_version: Some(3),
            headers: RateLimitHeaders {
                ratelimit: Some("\"p\";r=0;t=2".to_owned()),
                ratelimit_policy: Some("\"p\";q=5".to_owned()),
                retry_after: Some("2".to_owned()),
            },
            ..Decision::default()
        }
    }

    fn grant() -> Decision {
        Decision {
            allowed: true,
            remaining: Some(1),
            limit: Some(5),
            enforced: true,
            ..Decision::default()
        }
    }

    #[test]
    fn a_denial_answers_calls_for_as_many_permits_or_more_until_its_retry_time() {
        let cache = DenialCache::new(10);
        let t0 = Instant::now();
        cache.record_at("r", Some("k"), 2, &denial(1500), t0);
        let later = t0 + Duration::from_millis(400);
        let hit = cache.lookup_at("r", Some("k"), 2, later).unwrap();
        assert!(hit.cached && !hit.allowed && !hit.degraded);
        assert_eq!(hit.retry_after_ms, Some(1100));
        assert_eq!((hit.remaining, hit.limit), (Some(0), Some(5)));
        assert_eq!(hit.policy_version, Some(3));
        assert_eq!(hit.headers.retry_after.as_deref(), Some("2"));
        assert_eq!(hit.headers.ratelimit.as_deref(), Some("\"p\";r=0;t=2"));
        assert_eq!(hit.headers.ratelimit_policy.as_deref(), Some("\"p\";q=5"));
        assert!(cache.lookup_at("r", Some("k"), 3, later).is_some());
        // Fewer permits may be there: asked of the server.
        assert!(cache.lookup_at("r", Some("k"), 1, later).is_none());
        // Another key, no key, another resource: not this denial.
        assert!(cache.lookup_at("r", Some("j"), 2, later).is_none());
        assert!(cache.lookup_at("r", None, 2, later).is_none());
        assert!(cache.lookup_at("s", Some("k"), 2, later).is_none());
        // Its time up: gone.
        let after = t0 + Duration::from_millis(1500);
        assert!(cache.lookup_at("r", Some("k"), 2, after).is_none());
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_check_counts_as_one_permit() {
        let cache = DenialCache::new(10);
        let t0 = Instant::now();
        cache.record_at("r", None, 0, &denial(1000), t0);
        assert!(cache.lookup_at("r", None, 1, t0).is_some());
        assert!(cache.lookup_at("r", None, 0, t0).is_some());
        let cache = DenialCache::new(10);
        cache.record_at("r", None, 2, &denial(1000), t0);
        assert!(cache.lookup_at("r", None, 0, t0).is_none());
    }

    #[test]
    fn a_grant_or_forget_drops_the_entry_and_odd_decisions_are_not_kept() {
        let cache = DenialCache::new(10);
        let t0 = Instant::now();
        cache.record_at("r", Some("k"), 1, &denial(1000), t0);
        cache.record_at("r", Some("k"), 1, &grant(), t0);
        assert!(cache.lookup_at("r", Some("k"), 1, t0).is_none());
        cache.record_at("r", Some("k"), 1, &denial(1000), t0);
        cache.forget("r", Some("k"));
        assert!(cache.lookup_at("r", Some("k"), 1, t0).is_none());
        let mut degraded = denial(1000);
        degraded.degraded = true;
        cache.record_at("r", None, 1, &degraded, t0);
        cache.record_at("r", None, 1, &denial(0), t0);
        let mut cached = denial(1000);
        cached.cached = true;
        cache.record_at("r", None, 1, &cached, t0);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn full_it_evicts_the_expired_then_the_oldest() {
        let cache = DenialCache::new(3);
        let t0 = Instant::now();
        cache.record_at("a", None, 1, &denial(100), t0);
        cache.record_at("b", None, 1, &denial(5000), t0);
        cache.record_at("c", None, 1, &denial(5000), t0);
        let t1 = t0 + Duration::from_millis(200);
        // "a" has expired: it goes, the others stay.
        cache.record_at("d", None, 1, &denial(5000), t1);
        assert_eq!(cache.len(), 3);
        for live in ["b", "c", "d"] {
            assert!(cache.lookup_at(live, None, 1, t1).is_some(), "{live}");
        }
        // None expired: the oldest ("b") goes.
        cache.record_at("e", None, 1, &denial(5000), t1);
        assert_eq!(cache.len(), 3);
        assert!(cache.lookup_at("b", None, 1, t1).is_none());
        for live in ["c", "d", "e"] {
            assert!(cache.lookup_at(live, None, 1, t1).is_some(), "{live}");
        }
        // Renewing an entry of a full cache evicts nothing.
        cache.record_at("c", None, 1, &denial(6000), t1);
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn size_zero_is_off() {
        let cache = DenialCache::new(0);
        let t0 = Instant::now();
        cache.record_at("r", None, 1, &denial(1000), t0);
        assert!(cache.lookup_at("r", None, 1, t0).is_none());
        assert_eq!(cache.len(), 0);
    }
}
