//! Local answers to denial floods. A denial says when `permits` will next be there
//! (`retry_after_ms`); until then the same application asking the same policy for as
//! many permits or more is certainly denied too (tokens only grow with time, and other
//! clients can only take them), so this instance answers without asking Redis, and Redis
//! load stays flat under abuse. An entry lives at most one sync interval, and no longer
//! than this instance's view of its policy:
//!
//! - an entry holds only for the policy version this instance's snapshot has (a change
//!   made here, or reloaded from SQL, ends it at once);
//! - a change notice from another instance ends every entry as soon as it is heard
//!   ([`DenialCache::forget_all`]), before the change is reloaded from SQL: Redis already
//!   has the change, so asking it again is what applies it (a switch to shadow mode, a
//!   raised limit);
//! - a denial Redis gave before such a notice, but whose reply came after it, is not
//!   remembered (each entry carries the generation of notices it was asked under);
//! - a refund ends its caller's denial of that policy, and a denial asked for before a
//!   refund but answered after it is not remembered (the generation counts refunds too,
//!   in its low bits, which end no entry: a refund does not end other callers' denials).
//!
//! Entries are per caller (an app, or a keyed bucket's caller), at most
//! [`DENIAL_CAPACITY`] in all.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;

use ratekeeper_limiter::{Decided, Decision};

use crate::domain::PolicyName;

/// A denial as Redis gave it, and until when it holds.
#[derive(Debug, Clone, Copy)]
struct Denial {
    at: Instant,
    until: Instant,
    permits: i64,
    decided: Decided,
    /// The [`DenialCache::generation`] the acquire that got it was asked under.
    generation: u64,
}

pub struct DenialCache {
    /// By policy name, then by caller: the app (global policies) or the bucket's caller
    /// (keyed ones: an app slug or a key).
    entries: DashMap<String, HashMap<Box<str>, Denial>>,
    /// How many denials are held, over all policies: never more than `capacity`, so a
    /// flood over millions of keys cannot grow memory without bound.
    held: AtomicUsize,
    capacity: usize,
    max_age: Duration,
    /// Raised by [`NOTICE`] at every change notice heard (an entry asked under an older
    /// notice holds no more), and by 1 at every refund (a denial asked for before it is
    /// not remembered).
    generation: AtomicU64,
}

/// One change notice in [`DenialCache::generation`]; the bits below it count refunds.
const NOTICE: u64 = 1 << 32;

/// Most denials an instance remembers at once (about 100 bytes each, plus the key).
pub const DENIAL_CAPACITY: usize = 100_000;

impl DenialCache {
    pub fn new(max_age: Duration) -> Self {
        Self::with_capacity(max_age, DENIAL_CAPACITY)
    }

    pub fn with_capacity(max_age: Duration, capacity: usize) -> Self {
        Self {
            entries: DashMap::new(),
            held: AtomicUsize::new(0),
            capacity,
            max_age,
            generation: AtomicU64::new(0),
        }
    }

    /// The generation to pass to [`DenialCache::remember`], read before Redis is asked.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A denial still in force for this request, if one is known, given under `version`
    /// of the policy (what this instance's snapshot has; `None` for a policy it does not
    /// know).
    pub fn check(
        &self,
        policy: &PolicyName,
        caller: &str,
        permits: i64,
        version: Option<i64>,
    ) -> Option<Decided> {
        // Nothing held, the usual case while no one is denied: no shard of the map (a lock
        // every worker shares) is touched, only a counter no grant writes.
        if self.held.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let entry = self.entries.get(policy.as_str())?;
        let d = entry.get(caller)?;
        let now = Instant::now();
        if now >= d.until
            || permits < d.permits
            || d.generation / NOTICE != self.generation() / NOTICE
            || version.is_some_and(|v| v != d.decided.version)
        {
            return None;
        }
        let elapsed = now.duration_since(d.at).as_millis() as i64;
        Some(Decided {
            retry_after_ms: (d.decided.retry_after_ms - elapsed).max(1),
            reset_after_ms: (d.decided.reset_after_ms - elapsed).max(1),
            ..d.decided
        })
    }

    /// Remembers a denial of `permits` that Redis just gave to an acquire asked under
    /// `generation`, if there is room.
    pub fn remember(
        &self,
        policy: &PolicyName,
        caller: &str,
        permits: i64,
        given: Decided,
        generation: u64,
    ) {
        debug_assert!(matches!(
            given.decision,
            Decision::Denied | Decision::ShadowDenied
        ));
        if given.retry_after_ms <= 0 || generation != self.generation() {
            return;
        }
        let at = Instant::now();
        let life = Duration::from_millis(given.retry_after_ms as u64).min(self.max_age);
        let denial = Denial {
            at,
            until: at + life,
            permits,
            decided: Decided {
                lease: None,
                ..given
            },
            generation,
        };
        let mut entry = self.entries.entry(policy.to_string()).or_default();
        if let Some(d) = entry.get_mut(caller) {
            *d = denial;
            return;
        }
        if self.held.load(Ordering::Relaxed) >= self.capacity {
            // Full: make room from this policy's lapsed denials, or do without (Redis then
            // answers, as it would without this cache).
            let before = entry.len();
            entry.retain(|_, d| d.until > at);
            self.held.fetch_sub(before - entry.len(), Ordering::Relaxed);
            if self.held.load(Ordering::Relaxed) >= self.capacity {
                return;
            }
        }
        entry.insert(caller.into(), denial);
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops what is known of a policy (it changed, went away, or a bucket of it was
    /// reset). A denial asked for before now is not remembered when it comes back: it may
    /// tell of the bucket as it was.
    pub fn forget(&self, policy: &str) {
        self.generation.fetch_add(NOTICE, Ordering::AcqRel);
        if let Some((_, denials)) = self.entries.remove(policy) {
            self.held.fetch_sub(denials.len(), Ordering::Relaxed);
        }
    }

    /// Drops the denial of one caller of a policy (permits were given back to its bucket).
    /// A denial asked for before now is not remembered when it comes back (it may tell of
    /// the bucket before the permits came back); other callers' denials hold.
    pub fn forget_caller(&self, policy: &str, caller: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        if let Some(mut denials) = self.entries.get_mut(policy)
            && denials.remove(caller).is_some()
        {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Drops every denial at once: another instance announced a change, which this one has
    /// not read yet. Denials asked for before now are not remembered when they come back.
    pub fn forget_all(&self) {
        self.generation.fetch_add(NOTICE, Ordering::AcqRel);
        self.forget_changed(|_| None);
    }

    /// Drops the entries of policies whose version is no longer `current(name)`, every
    /// denial that has lapsed, and those of an older generation.
    pub fn forget_changed(&self, current: impl Fn(&str) -> Option<i64>) {
        let now = Instant::now();
        let notices = self.generation() / NOTICE;
        self.entries.retain(|name, denials| {
            let version = current(name);
            let before = denials.len();
            denials.retain(|_, d| {
                Some(d.decided.version) == version
                    && d.until > now
                    && d.generation / NOTICE == notices
            });
            self.held
                .fetch_sub(before - denials.len(), Ordering::Relaxed);
            !denials.is_empty()
        });
    }

    /// How many denials are held now.
    pub fn len(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(retry_after_ms: i64) -> Decided {
        Decided {
            decision: Decision::Denied,
            remaining: 1,
            limit: 10,
            version: 3,
            retry_after_ms,
            reset_after_ms: 9_000,
            lease: None,
            algorithm: ratekeeper_limiter::domain::Algorithm::TokenBucket,
        }
    }

    fn names() -> (PolicyName, &'static str, &'static str) {
        (PolicyName::parse("p").unwrap(), "shop", "other")
    }

    #[test]
    fn answers_the_same_or_larger_requests_of_the_same_app() {
        let cache = DenialCache::new(Duration::from_secs(60));
        let (p, shop, other) = names();
        cache.remember(&p, shop, 2, denial(5_000), 0);
        let hit = cache.check(&p, shop, 2, None).unwrap();
        assert_eq!((hit.remaining, hit.limit, hit.version), (1, 10, 3));
        assert!(hit.retry_after_ms <= 5_000 && hit.retry_after_ms > 4_000);
        assert!(
            cache.check(&p, shop, 3, None).is_some(),
            "more permits: still denied"
        );
        assert!(
            cache.check(&p, shop, 1, None).is_none(),
            "fewer permits may fit"
        );
        assert!(
            cache.check(&p, other, 2, None).is_none(),
            "another app asks Redis"
        );
        cache.forget("p");
        assert!(cache.check(&p, shop, 2, None).is_none());
    }

    #[test]
    fn entries_expire_with_the_retry_time_and_the_version() {
        let cache = DenialCache::new(Duration::from_secs(60));
        let (p, shop, _) = names();
        cache.remember(&p, shop, 1, denial(0), 0);
        assert!(
            cache.check(&p, shop, 1, None).is_none(),
            "nothing to wait for"
        );
        cache.remember(&p, shop, 1, denial(5_000), 0);
        cache.forget_changed(|_| Some(3));
        assert!(
            cache.check(&p, shop, 1, None).is_some(),
            "same version kept"
        );
        cache.forget_changed(|_| Some(4));
        assert!(
            cache.check(&p, shop, 1, None).is_none(),
            "a new version drops it"
        );
        let short = DenialCache::new(Duration::ZERO);
        short.remember(&p, shop, 1, denial(5_000), 0);
        assert!(
            short.check(&p, shop, 1, None).is_none(),
            "never older than max_age"
        );
    }

    #[test]
    fn a_denial_holds_only_for_the_policy_version_this_instance_has() {
        let cache = DenialCache::new(Duration::from_secs(60));
        let (p, shop, _) = names();
        cache.remember(&p, shop, 1, denial(5_000), 0);
        assert!(cache.check(&p, shop, 1, Some(3)).is_some());
        assert!(
            cache.check(&p, shop, 1, Some(4)).is_none(),
            "the snapshot has another version: Redis decides"
        );
    }

    #[test]
    fn a_change_notice_ends_every_denial_and_those_still_on_their_way() {
        let cache = DenialCache::new(Duration::from_secs(60));
        let (p, shop, other) = names();
        cache.remember(&p, shop, 1, denial(5_000), cache.generation());
        // An acquire asks Redis before the notice; its denial comes back after it.
        let asked_under = cache.generation();
        cache.forget_all();
        assert!(cache.check(&p, shop, 1, None).is_none());
        assert!(cache.is_empty(), "nothing held for nothing");
        cache.remember(&p, other, 1, denial(5_000), asked_under);
        assert!(
            cache.check(&p, other, 1, None).is_none(),
            "given before the change: not remembered"
        );
        cache.remember(&p, other, 1, denial(5_000), cache.generation());
        assert!(cache.check(&p, other, 1, None).is_some(), "asked after it");
    }
}

#[cfg(test)]
mod refunds {
    use super::*;

    fn denial() -> Decided {
        Decided {
            decision: Decision::Denied,
            remaining: 0,
            limit: 1,
            version: 1,
            retry_after_ms: 5_000,
            reset_after_ms: 5_000,
            lease: None,
            algorithm: ratekeeper_limiter::domain::Algorithm::TokenBucket,
        }
    }

    #[test]
    fn a_refund_ends_its_callers_denial_and_those_on_their_way_only() {
        let cache = DenialCache::new(Duration::from_secs(60));
        let p = PolicyName::parse("p").unwrap();
        cache.remember(&p, "ann", 1, denial(), cache.generation());
        cache.remember(&p, "bob", 1, denial(), cache.generation());
        let asked_under = cache.generation();
        cache.forget_caller("p", "ann");
        assert!(cache.check(&p, "ann", 1, None).is_none(), "refunded");
        assert!(
            cache.check(&p, "bob", 1, None).is_some(),
            "another caller's holds"
        );
        assert_eq!(cache.len(), 1);
        cache.remember(&p, "cy", 1, denial(), asked_under);
        assert!(
            cache.check(&p, "cy", 1, None).is_none(),
            "asked before a refund: not remembered"
        );
        cache.forget_changed(|_| Some(1));
        assert!(cache.check(&p, "bob", 1, None).is_some(), "kept by a sweep");
    }
}

#[cfg(test)]
mod bounded {
    use super::*;

    #[test]
    fn a_flood_over_many_callers_stays_within_capacity() {
        let cache = DenialCache::with_capacity(Duration::from_secs(60), 100);
        let p = PolicyName::parse("p").unwrap();
        let denial = Decided {
            decision: Decision::Denied,
            remaining: 0,
            limit: 1,
            version: 1,
            retry_after_ms: 5_000,
            reset_after_ms: 5_000,
            lease: None,
            algorithm: ratekeeper_limiter::domain::Algorithm::TokenBucket,
        };
        for i in 0..10_000 {
            cache.remember(&p, &format!("user-{i}"), 1, denial, 0);
        }
        assert_eq!(cache.len(), 100);
        assert!(cache.check(&p, "user-0", 1, None).is_some());
        assert!(
            cache.check(&p, "user-9999", 1, None).is_none(),
            "no room: Redis answers"
        );
        cache.forget("p");
        assert!(cache.is_empty());
    }
}
