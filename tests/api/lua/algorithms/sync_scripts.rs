//! sync_policy.lua and delete_if_stale.lua: state resets, old callers, bad configs.

use redis::RedisResult;

use super::{Config, DENIED, GRANTED, OTHER_ALGORITHM, Policy};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

/// The state fields the algorithms keep in the policy's hash.
const STATE_FIELDS: [&str; 6] = [
    "curr_permits",
    "last_mill_second",
    "tat",
    "sw_start",
    "sw_curr",
    "sw_prev",
];

#[tokio::test]
async fn sync_policy_discards_all_state_when_the_algorithm_changes() {
    let mut c = Config::of(TokenBucket, 5);
    let p = Policy::new(c.clone()).await;
    assert_eq!(p.acquire(1, "shop").await[0], GRANTED);
    assert_eq!(p.exists(&p.state_key("tb")).await, 1);
    for algo in [
        Gcra,
        SlidingWindow,
        FixedWindow,
        SlidingLog,
        Concurrency,
        TokenBucket,
    ] {
        let old = Config::of(algo, 5);
        c = Config {
            version: c.version + 1,
            ..old
        };
        assert_eq!(p.sync(&c).await.unwrap(), 1, "{algo:?}");
        assert_eq!(
            p.sync(&c).await.unwrap(),
            0,
            "{algo:?}: the same config again"
        );
        for field in STATE_FIELDS {
            assert_eq!(p.field(field).await, None, "{algo:?}: {field} left behind");
        }
        for key in p.state_keys() {
            assert_eq!(p.exists(&key).await, 0, "{algo:?}: {key} left behind");
        }
        let reply = p.run(algo, 1, "shop", &random_suffix()).await;
        assert_eq!(reply[..2], [GRANTED, 4], "{algo:?}: a fresh start");
        // The algorithm's state is there now, for the next change to discard.
        let has_state = match algo.state_suffix() {
            Some(suffix) => p.exists(&p.state_key(suffix)).await == 1,
            None => {
                let field = match algo {
                    Gcra => "tat",
                    _ => "sw_curr",
                };
                p.field(field).await.is_some()
            }
        };
        assert!(has_state, "{algo:?} wrote no state");
    }
}

#[tokio::test]
async fn sync_policy_resets_a_new_incarnation_or_a_new_window_only() {
    let mut c = Config::of(FixedWindow, 2);
    let p = Policy::new(c.clone()).await;
    let fw = p.state_key("fw");
    assert_eq!(p.acquire(2, "shop").await[0], GRANTED);
    // Another app and a higher max: the window's count stays.
    c.version = 2;
    c.apps = ",shop,other,";
    c.max = 3;
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(
        p.acquire(1, "other").await[..2],
        [GRANTED, 0],
        "2 of 3 were used"
    );
    // Another window: a fresh count.
    c.version = 3;
    c.window_ms = Some(30_000);
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(p.exists(&fw).await, 0);
    assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0]);
    // A new incarnation (deleted and created again): a fresh count.
    c.created = 2;
    c.version = 1;
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(p.exists(&fw).await, 0);
    assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0]);
    // An older view changes nothing.
    let mut older = c.clone();
    older.created = 1;
    older.algo = Gcra;
    assert_eq!(p.sync(&older).await.unwrap(), 0);
    assert_eq!(p.exists(&fw).await, 1);
    // A lease TTL change keeps the leases held.
    let mut c = Config::of(Concurrency, 2);
    let p = Policy::new(c.clone()).await;
    assert_eq!(p.acquire_lease(2, "shop", "L1").await[0], GRANTED);
    c.version = 2;
    c.lease_ttl_ms = Some(30_000);
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(p.field("lease_ttl_ms").await.as_deref(), Some("30000"));
    assert_eq!(p.acquire_lease(1, "shop", "L2").await[0], DENIED);
    assert_eq!(p.release("shop", "L1").await[..3], [GRANTED, 2, 2]);
}

#[tokio::test]
async fn sync_policy_with_six_arguments_means_token_bucket() {
    let mut c = Config::of(FixedWindow, 5);
    let p = Policy::new(c.clone()).await;
    assert_eq!(p.acquire(1, "shop").await[0], GRANTED);
    assert_eq!(p.field("algorithm").await.as_deref(), Some("fixed_window"));
    c.version = 2;
    assert_eq!(p.sync_six(&c, true).await, 1);
    assert_eq!(p.field("algorithm").await, None);
    assert_eq!(p.exists(&p.state_key("fw")).await, 0);
    assert_eq!(
        p.field("window_ms").await,
        None,
        "a parameter token_bucket does not use goes"
    );
    assert_eq!(p.run(TokenBucket, 1, "shop", "").await[..2], [GRANTED, 4]);
    assert_eq!(
        p.run(FixedWindow, 1, "shop", "").await[..2],
        [OTHER_ALGORITHM, 1]
    );
    assert_eq!(p.sync_six(&c, false).await, 0, "nothing to do");
    // An explicit token_bucket is the same config.
    c.algo = TokenBucket;
    assert_eq!(p.sync(&c).await.unwrap(), 0);
}

#[tokio::test]
async fn sync_policy_refuses_an_invalid_algorithm_config() {
    let p = Policy::new(Config::of(TokenBucket, 5)).await;
    let fresh = Policy {
        key: format!("{}-fresh", p.key),
        ..p.clone()
    };
    let mut bad = Config::of(FixedWindow, 5);
    for window in [0, -5] {
        bad.window_ms = Some(window);
        assert!(fresh.sync(&bad).await.is_err(), "window_ms {window}");
    }
    bad.window_ms = None;
    assert!(
        fresh.sync(&bad).await.is_err(),
        "fixed_window without window_ms"
    );
    let mut bad = Config::of(Concurrency, 5);
    bad.lease_ttl_ms = None;
    assert!(
        fresh.sync(&bad).await.is_err(),
        "concurrency without lease_ttl_ms"
    );
    let mut conn = p.conn.clone();
    let unknown: RedisResult<i64> = SYNC_POLICY
        .key(&fresh.key)
        .arg(1)
        .arg(1)
        .arg(5)
        .arg("1")
        .arg(",shop,")
        .arg("1")
        .arg("leaky")
        .invoke_async(&mut conn)
        .await;
    assert!(unknown.is_err(), "an unknown algorithm");
    let fractional: RedisResult<i64> = SYNC_POLICY
        .key(&fresh.key)
        .arg(1)
        .arg(1)
        .arg(5)
        .arg("1")
        .arg(",shop,")
        .arg("1")
        .arg("fixed_window")
        .arg("1.5")
        .invoke_async(&mut conn)
        .await;
    assert!(fractional.is_err(), "a fractional window");
    assert_eq!(fresh.exists(&fresh.key).await, 0, "nothing was written");
}

#[tokio::test]
async fn delete_if_stale_deletes_the_state_keys_with_the_policy() {
    let p = Policy::new(Config::of(Concurrency, 5)).await;
    assert_eq!(p.acquire_lease(1, "shop", "L1").await[0], GRANTED);
    let delete = |bound: i64| {
        let p = p.clone();
        async move {
            let mut conn = p.conn.clone();
            let mut inv = DELETE_IF_STALE.prepare_invoke();
            inv.key(&p.key);
            for k in p.state_keys() {
                inv.key(k);
            }
            inv.arg(bound);
            inv.invoke_async::<i64>(&mut conn).await.unwrap()
        }
    };
    assert_eq!(
        delete(1).await,
        0,
        "created at 1: not stale for a read at 1"
    );
    assert_eq!(p.exists(&p.state_key("leases")).await, 1);
    assert_eq!(delete(2).await, 1);
    assert_eq!(p.exists(&p.key).await, 0);
    for key in p.state_keys() {
        assert_eq!(p.exists(&key).await, 0, "{key}");
    }
}
