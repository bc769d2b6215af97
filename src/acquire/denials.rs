//! Local answers to denial floods. A denial says when `permits` will next be there
//! (`retry_after_ms`); until then the same application asking the same policy for as
//! many permits or more is certainly denied too (tokens only grow with time, and other
//! clients can only take them), so this instance answers without asking Redis, and Redis
//! load stays flat under abuse. An entry lives at most one sync interval, and a policy
//! change drops its entries, so a change made elsewhere is honoured within one interval.

use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::domain::{AppSlug, PolicyName};

#[derive(Debug, Clone, Copy)]
struct Denial {
    at: Instant,
    until: Instant,
    permits: i64,
    remaining: i64,
    limit: i64,
    version: i64,
    retry_after_ms: i64,
    reset_after_ms: i64,
}

/// A denial as it stands now, the times counted down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedDenial {
    pub remaining: i64,
    pub limit: i64,
    pub version: i64,
    pub retry_after_ms: i64,
    pub reset_after_ms: i64,
}

pub struct DenialCache {
    /// By policy name, then by application (few per policy).
    entries: DashMap<String, Vec<(AppSlug, Denial)>>,
    max_age: Duration,
}

impl DenialCache {
    pub fn new(max_age: Duration) -> Self {
        Self {
            entries: DashMap::new(),
            max_age,
        }
    }

    /// A denial still in force for this request, if one is known.
    pub fn check(&self, policy: &PolicyName, app: &AppSlug, permits: i64) -> Option<CachedDenial> {
        let entry = self.entries.get(policy.as_str())?;
        let (_, d) = entry.iter().find(|(a, _)| a == app)?;
        let now = Instant::now();
        if now >= d.until || permits < d.permits {
            return None;
        }
        let elapsed = now.duration_since(d.at).as_millis() as i64;
        Some(CachedDenial {
            remaining: d.remaining,
            limit: d.limit,
            version: d.version,
            retry_after_ms: (d.retry_after_ms - elapsed).max(1),
            reset_after_ms: (d.reset_after_ms - elapsed).max(1),
        })
    }

    /// Remembers a denial of `permits` that Redis just gave.
    pub fn remember(&self, policy: &PolicyName, app: &AppSlug, permits: i64, given: CachedDenial) {
        if given.retry_after_ms <= 0 {
            return;
        }
        let at = Instant::now();
        let life = Duration::from_millis(given.retry_after_ms as u64).min(self.max_age);
        let denial = Denial {
            at,
            until: at + life,
            permits,
            remaining: given.remaining,
            limit: given.limit,
            version: given.version,
            retry_after_ms: given.retry_after_ms,
            reset_after_ms: given.reset_after_ms,
        };
        let mut entry = self.entries.entry(policy.to_string()).or_default();
        entry.retain(|(_, d)| d.until > at);
        match entry.iter_mut().find(|(a, _)| a == app) {
            Some((_, d)) => *d = denial,
            None => entry.push((app.clone(), denial)),
        }
    }

    /// Drops what is known of a policy (it changed or went away).
    pub fn forget(&self, policy: &str) {
        self.entries.remove(policy);
    }

    /// Drops the entries of policies whose version is no longer `current(name)`.
    pub fn forget_changed(&self, current: impl Fn(&str) -> Option<i64>) {
        self.entries.retain(|name, denials| {
            let version = current(name);
            denials.iter().all(|(_, d)| Some(d.version) == version)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(retry_after_ms: i64) -> CachedDenial {
        CachedDenial {
            remaining: 1,
            limit: 10,
            version: 3,
            retry_after_ms,
            reset_after_ms: 9_000,
        }
    }

    fn names() -> (PolicyName, AppSlug, AppSlug) {
        (
            PolicyName::parse("p").unwrap(),
            AppSlug::parse("shop").unwrap(),
            AppSlug::parse("other").unwrap(),
        )
    }

    #[test]
    fn answers_the_same_or_larger_requests_of_the_same_app() {
        let cache = DenialCache::new(Duration::from_secs(60));
        let (p, shop, other) = names();
        cache.remember(&p, &shop, 2, denial(5_000));
        let hit = cache.check(&p, &shop, 2).unwrap();
        assert_eq!((hit.remaining, hit.limit, hit.version), (1, 10, 3));
        assert!(hit.retry_after_ms <= 5_000 && hit.retry_after_ms > 4_000);
        assert!(
            cache.check(&p, &shop, 3).is_some(),
            "more permits: still denied"
        );
        assert!(cache.check(&p, &shop, 1).is_none(), "fewer permits may fit");
        assert!(
            cache.check(&p, &other, 2).is_none(),
            "another app asks Redis"
        );
        cache.forget("p");
        assert!(cache.check(&p, &shop, 2).is_none());
    }

    #[test]
    fn entries_expire_with_the_retry_time_and_the_version() {
        let cache = DenialCache::new(Duration::from_secs(60));
        let (p, shop, _) = names();
        cache.remember(&p, &shop, 1, denial(0));
        assert!(cache.check(&p, &shop, 1).is_none(), "nothing to wait for");
        cache.remember(&p, &shop, 1, denial(5_000));
        cache.forget_changed(|_| Some(3));
        assert!(cache.check(&p, &shop, 1).is_some(), "same version kept");
        cache.forget_changed(|_| Some(4));
        assert!(
            cache.check(&p, &shop, 1).is_none(),
            "a new version drops it"
        );
        let short = DenialCache::new(Duration::ZERO);
        short.remember(&p, &shop, 1, denial(5_000));
        assert!(
            short.check(&p, &shop, 1).is_none(),
            "never older than max_age"
        );
    }
}
