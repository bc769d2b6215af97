//! The give-backs of lua/lib/<algorithm>.lua, through lua/give_back.lua (refunds, and the
//! grants of an all-or-nothing acquire undone) and lua/acquire_all.lua: never above a
//! bucket's capacity, never a count below 0, the exact grant undone, and the checks of an
//! acquire.

use ratekeeper_limiter::scripts::{ACQUIRE_ALL, GIVE_BACK};

use super::{Config, GRANTED, NO_POLICY, NOT_ALLOWED, OTHER_ALGORITHM, Policy, Reply, UNENFORCED};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

impl Policy {
    /// give_back.lua for one global entry: `at_us` 0 for a refund, else the instant of the
    /// grant of `id` to undo.
    async fn give_back(&self, algo: Algo, permits: i64, app: &str, at_us: i64, id: &str) -> Reply {
        let mut conn = self.conn.clone();
        let mut inv = GIVE_BACK.prepare_invoke();
        inv.key(&self.key);
        if let Some(suffix) = algo.state_suffix() {
            inv.key(self.state_key(suffix));
        }
        inv.arg(algo.index())
            .arg(at_us)
            .arg(permits)
            .arg(app)
            .arg(algo.config_args());
        if matches!(algo, SlidingLog | Concurrency) {
            inv.arg(id);
        }
        inv.invoke_async(&mut conn).await.unwrap()
    }

    async fn refund(&self, permits: i64) -> Reply {
        self.give_back(self.algo, permits, "shop", 0, "").await
    }

    /// acquire_all.lua for items of this policy (`take` false: a check) and, when
    /// `with_missing`, an item of a policy that does not exist after them (which fails the
    /// call): the clock reading and the replies.
    async fn acquire_all(
        &self,
        items: &[(i64, bool, &str)],
        with_missing: bool,
    ) -> (i64, Vec<Reply>) {
        let mut conn = self.conn.clone();
        let mut inv = ACQUIRE_ALL.prepare_invoke();
        let missing = format!("{}-missing", self.key);
        for _ in items {
            inv.key(&self.key);
            if let Some(suffix) = self.algo.state_suffix() {
                inv.key(self.state_key(suffix));
            }
        }
        if with_missing {
            inv.key(&missing).key(format!("{missing}:tb"));
        }
        for &(permits, take, id) in items {
            inv.arg(self.algo.index())
                .arg(i64::from(take))
                .arg(permits)
                .arg("shop")
                .arg(self.algo.config_args());
            if matches!(self.algo, SlidingLog | Concurrency) {
                inv.arg(id);
            }
        }
        if with_missing {
            inv.arg(TokenBucket.index())
                .arg(1)
                .arg(1)
                .arg("shop")
                .arg(TokenBucket.config_args());
        }
        let packed: Vec<u8> = inv.invoke_async(&mut conn).await.unwrap();
        let integers = ratekeeper_limiter::scripts::batch_reply_integers(&packed).unwrap();
        let replies = integers[1..].chunks(6).map(<[i64]>::to_vec).collect();
        (integers[0], replies)
    }
}

/// What a check says of the bucket now: {code, remaining}.
async fn check(p: &Policy) -> Vec<i64> {
    p.acquire_all(&[(1, false, "check")], false).await.1[0][..2].to_vec()
}

#[tokio::test]
async fn a_refund_refills_at_most_to_capacity_and_lowers_a_count_at_most_to_zero() {
    for algo in Algo::ALL.into_iter().filter(|a| *a != Concurrency) {
        let p = Policy::new(Config::of(algo, 5)).await;
        assert_eq!(p.acquire(4, "shop").await[..2], [GRANTED, 1], "{algo:?}");
        let some = p.refund(2).await;
        assert_eq!(
            (some[0], some[1], some[2], some[4]),
            (GRANTED, 3, 0, 5),
            "{algo:?}: {some:?}"
        );
        assert!(some[3] > 0, "{algo:?}: not full yet: {some:?}");
        let after = p.refund(2).await;
        assert_eq!(
            (after[0], after[1], after[4], after[5]),
            (GRANTED, 5, 5, 1),
            "{algo:?}: {after:?}"
        );
        let beyond = p.refund(1_000).await;
        assert_eq!(beyond[..2], [GRANTED, 5], "{algo:?}: {beyond:?}");
        assert_eq!(beyond[3], 0, "{algo:?}: full again at once: {beyond:?}");
        assert_eq!(check(&p).await, [GRANTED, 5], "{algo:?}");
        // Exactly the capacity again, not a permit more.
        assert_eq!(p.use_up(10).await, 5, "{algo:?}");
        if algo == SlidingLog {
            assert_eq!(p.zcard(&p.state_key("log")).await, 5);
        }
    }
}

#[tokio::test]
async fn a_refund_passes_the_checks_of_an_acquire() {
    let p = Policy::new(Config::of(Gcra, 2)).await;
    assert_eq!(p.give_back(Gcra, 1, "other", 0, "").await[0], NOT_ALLOWED);
    assert_eq!(
        p.give_back(Gcra, 0, "shop", 0, "").await[0],
        GRANTED,
        "nothing given back is fine"
    );
    let other = p.give_back(FixedWindow, 1, "shop", 0, "").await;
    assert_eq!(other[..2], [OTHER_ALGORITHM, Gcra.index()]);
    let missing = Policy {
        key: format!("{}-none", p.key),
        ..p.clone()
    };
    assert_eq!(
        missing.give_back(Gcra, 1, "shop", 0, "").await[0],
        NO_POLICY
    );
    // A concurrency policy's leases are released, not refunded.
    let leases = Policy::new(Config::of(Concurrency, 2)).await;
    let refused = leases.refund(1).await;
    assert_eq!(refused[..2], [OTHER_ALGORITHM, Concurrency.index()]);
    // A disabled policy gets nothing back, and its state is not touched.
    let mut config = Config::of(FixedWindow, 3);
    let off = Policy::new(config.clone()).await;
    assert_eq!(off.acquire(2, "shop").await[0], GRANTED);
    config.enabled = false;
    config.version = 2;
    off.sync(&config).await.unwrap();
    let before = off.snapshot().await;
    assert_eq!(off.refund(2).await[..2], [UNENFORCED, 1]);
    assert_eq!(off.snapshot().await, before);
}

#[tokio::test]
async fn a_failed_call_gives_every_grant_back_and_a_check_takes_nothing() {
    for algo in Algo::ALL {
        let p = Policy::new(Config::of(algo, 5)).await;
        assert_eq!(p.acquire(1, "shop").await[0], GRANTED, "{algo:?}");
        let before = check(&p).await;
        assert_eq!(before, [GRANTED, 4], "{algo:?}");
        // Two grants on the bucket, then an item that refuses: both given back.
        let (_, replies) = p
            .acquire_all(
                &[(2, true, &random_suffix()), (1, true, &random_suffix())],
                true,
            )
            .await;
        // Given back latest first, each telling its bucket after its own give-back (the
        // API never puts two items on one bucket).
        assert_eq!(replies[0][..2], [GRANTED, 4], "{algo:?}: {replies:?}");
        assert_eq!(replies[1][..2], [GRANTED, 2], "{algo:?}: {replies:?}");
        assert_eq!(replies[2][0], NO_POLICY, "{algo:?}");
        assert_eq!(check(&p).await, before, "{algo:?}");
        // Kept when nothing fails; a check after a grant tells what the grant left.
        let (_, replies) = p
            .acquire_all(&[(3, true, &random_suffix()), (1, false, "check")], false)
            .await;
        assert_eq!(replies[0][..2], [GRANTED, 1], "{algo:?}: {replies:?}");
        assert_eq!(replies[1][..2], [GRANTED, 1], "{algo:?}: {replies:?}");
        assert_eq!(check(&p).await, [GRANTED, 1], "{algo:?}");
    }
}

#[tokio::test]
async fn undoing_a_grant_removes_exactly_its_own_entries() {
    let p = Policy::new(Config::of(SlidingLog, 5)).await;
    let log = p.state_key("log");
    assert_eq!(p.acquire(1, "shop").await[0], GRANTED);
    let older = p.zrange(&log).await;
    let id = random_suffix();
    let (at, replies) = p.acquire_all(&[(2, true, &id)], false).await;
    assert_eq!(replies[0][..2], [GRANTED, 2]);
    // A newer grant after it: undoing the older one must not take the newest entries.
    assert_eq!(p.acquire(1, "shop").await[0], GRANTED);
    let newer: Vec<String> = p.zrange(&log).await[6..].to_vec();
    assert_eq!(p.zcard(&log).await, 4);
    let undone = p.give_back(SlidingLog, 2, "shop", at, &id).await;
    assert_eq!(undone[..2], [GRANTED, 3]);
    assert_eq!(
        p.zrange(&log).await,
        [older, newer].concat(),
        "the other grants stay"
    );
    // A lease undone is released.
    let leases = Policy::new(Config::of(Concurrency, 3)).await;
    let (at, replies) = leases.acquire_all(&[(2, true, "lease-1")], false).await;
    assert_eq!(replies[0][..2], [GRANTED, 1]);
    let undone = leases
        .give_back(Concurrency, 2, "shop", at, "lease-1")
        .await;
    assert_eq!(undone[..2], [GRANTED, 3]);
    assert_eq!(leases.zcard(&leases.state_key("leases")).await, 0);
}
