//! The concurrency scripts: leases given back, refused releases, expired leases reclaimed.

use std::time::Duration;

use redis::FromRedisValue;

use super::{Config, DENIED, GRANTED, LONG, Policy, REFUSED};
use crate::helpers::eventually;
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

/// A lease whose time has come is reclaimed by the next call, and one whose time has not
/// still holds. Leases of an hour, whose expiry the test moves on Redis' clock, so that no
/// lease expires (or not) by how fast the machine runs.
#[tokio::test]
async fn concurrency_reclaims_expired_leases() {
    let p = Policy::new(Config::of(Concurrency, 1)).await;
    let leases = p.state_key("leases");
    assert_eq!(p.acquire_lease(1, "shop", "L1").await[0], GRANTED);
    let second = p.acquire_lease(1, "shop", "L2").await;
    assert_eq!(second[..2], [DENIED, 0]);
    assert!((1..=LONG + 1).contains(&second[2]), "{second:?}");

    // L1 now expires a minute from now: it still holds, and says so.
    let expire_at = |ms: i64| {
        let p = p.clone();
        let leases = leases.clone();
        async move {
            let now_ms = p.redis_us().await / 1000;
            p.query::<i64>(
                redis::cmd("ZADD")
                    .arg(&leases)
                    .arg("XX")
                    .arg(now_ms + ms)
                    .arg("shop|L1|1"),
            )
            .await;
        }
    };
    expire_at(60_000).await;
    let second = p.acquire_lease(1, "shop", "L2").await;
    assert_eq!(second[..2], [DENIED, 0], "a lease before its expiry holds");
    assert!((1..=60_000).contains(&second[2]), "{second:?}");

    // L1's expiry is a moment past: the next call reclaims it and L2 is granted.
    expire_at(-1).await;
    assert_eq!(p.acquire_lease(1, "shop", "L2").await[..2], [GRANTED, 0]);
    let score: Option<f64> = p
        .query(redis::cmd("ZSCORE").arg(&leases).arg("shop|L1|1"))
        .await;
    assert_eq!(score, None, "the expired lease was removed from the set");
    assert_eq!(p.zcard(&leases).await, 1, "L2 alone is held");
    assert_eq!(
        p.release("shop", "L1").await[0],
        REFUSED,
        "expired: nothing to give back"
    );

    // The set lives exactly as long as its last lease (+1 ms): its TTL, the newest expiry
    // and Redis' clock read in one MULTI/EXEC, at one moment.
    let (before_us, values, after_us) = p
        .atomically(vec![
            redis::cmd("PTTL").arg(&leases).clone(),
            redis::cmd("ZRANGE")
                .arg(&leases)
                .arg(-1)
                .arg(-1)
                .arg("WITHSCORES")
                .clone(),
        ])
        .await;
    let ttl = i64::from_redis_value(values[0].clone()).unwrap();
    let last: Vec<(String, f64)> = FromRedisValue::from_redis_value(values[1].clone()).unwrap();
    // From the clock read before: less what it turned until the PTTL, ±1 ms of rounding.
    let lives_ms = last[0].1 - before_us as f64 / 1000.0;
    let turned_ms = (after_us - before_us) as f64 / 1000.0;
    assert!(
        (lives_ms - 1.0 - turned_ms..=lives_ms + 2.0).contains(&(ttl as f64)),
        "PTTL {ttl} ms for a last lease ending in {lives_ms} ms"
    );
}

/// Nobody releases, nothing calls: the lease set goes by itself with its last lease, and
/// never lives without a TTL meanwhile. (Leases of 50 ms, watched until the set is gone:
/// nothing here depends on when that happens, only that it does.)
#[tokio::test]
async fn concurrency_lease_set_expires_with_its_last_lease() {
    let p = Policy::new(Config::of(Concurrency, 2).every(50)).await;
    let leases = p.state_key("leases");
    assert_eq!(p.acquire_lease(1, "shop", "L1").await[0], GRANTED);
    assert_eq!(p.acquire_lease(1, "shop", "L2").await[0], GRANTED);
    let gone = eventually(Duration::from_secs(10), || async {
        assert_ne!(p.pttl(&leases).await, -1, "a lease set without a TTL");
        p.exists(&leases).await == 0
    })
    .await;
    assert!(gone, "the idle set never expired");
    // Nothing of the leases is left: both permits are free.
    assert_eq!(p.acquire_lease(2, "shop", "L3").await[..2], [GRANTED, 0]);
}
