//! The concurrency scripts: leases given back, refused releases, expired leases reclaimed.

use std::time::{Duration, Instant};

use super::{Config, DENIED, GRANTED, LONG, Policy, REFUSED};
use crate::lua::scripts::*;

#[tokio::test]
async fn concurrency_release_gives_the_permits_back() {
    let p = Policy::new(Config::of(Concurrency, 4)).await;
    let leases = p.state_key("leases");
    assert_eq!(p.acquire_lease(3, "shop", "L1").await[..2], [GRANTED, 1]);
    assert_eq!(p.acquire_lease(1, "shop", "L2").await[..2], [GRANTED, 0]);
    assert_eq!(p.zcard(&leases).await, 4);
    let ttl = p.pttl(&leases).await;
    assert!(
        (1..=LONG + 2).contains(&ttl),
        "the set lives as long as its last lease: {ttl}"
    );
    let denied = p.acquire_lease(1, "shop", "L3").await;
    assert_eq!(denied[..2], [DENIED, 0]);
    assert!((1..=LONG + 1).contains(&denied[2]), "{denied:?}");
    assert_eq!(p.zcard(&leases).await, 4, "a denial takes nothing");
    // One release gives back every permit of its lease.
    let released = p.release("shop", "L1").await;
    assert_eq!(released[..3], [GRANTED, 3, 3], "{released:?}");
    assert_eq!(released[4..], [4, 1]);
    assert_eq!(p.acquire_lease(3, "shop", "L3").await[..2], [GRANTED, 0]);
    assert_eq!(p.release("shop", "L2").await[..3], [GRANTED, 1, 1]);
    assert_eq!(p.release("shop", "L3").await[..4], [GRANTED, 4, 3, 0]);
    assert_eq!(p.exists(&leases).await, 0, "no lease, no set");
}

#[tokio::test]
async fn concurrency_refuses_a_second_release_and_another_apps_release() {
    let mut c = Config::of(Concurrency, 2);
    c.apps = ",shop,other,";
    let p = Policy::new(c).await;
    let leases = p.state_key("leases");
    assert_eq!(p.acquire_lease(2, "shop", "L1").await[0], GRANTED);
    let refused = p.release("other", "L1").await;
    assert_eq!(refused[..3], [REFUSED, 0, 0], "another app's lease");
    assert_eq!(p.zcard(&leases).await, 2, "still held");
    assert_eq!(
        p.release("shop", "nope").await[0],
        REFUSED,
        "an unknown lease"
    );
    assert_eq!(p.release("shop", "L1").await[..3], [GRANTED, 2, 2]);
    assert_eq!(
        p.release("shop", "L1").await[..3],
        [REFUSED, 2, 0],
        "released twice"
    );
    assert_eq!(p.acquire_lease(2, "other", "L1").await[0], GRANTED);
    assert_eq!(
        p.release("shop", "L1").await[0],
        REFUSED,
        "same id, other app"
    );
    assert_eq!(p.release("other", "L1").await[..3], [GRANTED, 2, 2]);
}

#[tokio::test]
async fn concurrency_reclaims_expired_leases() {
    const TTL: i64 = 50;
    let p = Policy::new(Config::of(Concurrency, 1).every(TTL)).await;
    let leases = p.state_key("leases");
    let before_l1 = p.redis_us().await;
    assert_eq!(p.acquire_lease(1, "shop", "L1").await[0], GRANTED);
    let ttl = p.pttl(&leases).await;
    assert!((0..=TTL + 2).contains(&ttl), "PTTL {ttl}");
    let second = p.acquire_lease(1, "shop", "L2").await;
    if second[0] == GRANTED {
        // Only possible when L1 had expired already (a slow machine): check that it had.
        assert!(p.redis_us().await >= before_l1 + TTL * 1000, "{second:?}");
    } else {
        assert_eq!(second[..2], [DENIED, 0]);
        assert!((1..=TTL + 1).contains(&second[2]), "{second:?}");
        // L1 is never released: L2 is granted once it expires (bounded polling).
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.acquire_lease(1, "shop", "L2").await[0] != GRANTED {
            assert!(
                Instant::now() < deadline,
                "the expired lease was never reclaimed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let score: Option<f64> = p
        .query(redis::cmd("ZSCORE").arg(&leases).arg("shop|L1|1"))
        .await;
    assert_eq!(score, None, "the expired lease was removed from the set");
    assert_eq!(
        p.release("shop", "L1").await[0],
        REFUSED,
        "expired: nothing to give back"
    );
    // L2 is never released either: the set itself goes with its last lease.
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.exists(&leases).await != 0 {
        assert_ne!(p.pttl(&leases).await, -1, "a lease set without a TTL");
        assert!(Instant::now() < deadline, "the idle set never expired");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
