//! `lua/flush_policies.lua`, through the flusher's write (`Limiter::add_flush`): one call
//! adds each policy's usage pairs, shadow counts and top callers (trimmed), for many
//! policies at once, and sets each key's expiry once: a later flush leaves a set expiry
//! alone, and a key Redis lost comes back with one.

use std::time::Duration;

use ratekeeper_limiter::{AppFlush, Limiter, MinuteCounts, PolicyFlush, TopBatch};

use crate::helpers::{LocalCluster, redis_url, test_prefix};

/// A Unix minute (minute 20 of its hour).
const MINUTE: i64 = 29_000_000;

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

async fn u32s(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    from: i64,
    n: i64,
) -> Vec<i64> {
    let mut cmd = redis::cmd("BITFIELD");
    cmd.arg(key);
    for i in from..from + n {
        cmd.arg("GET").arg("u32").arg(format!("#{i}"));
    }
    cmd.query_async(conn).await.unwrap()
}

/// Deletes every key under `prefix`.
async fn delete_keys(conn: &mut redis::aio::MultiplexedConnection, prefix: &str) {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(conn)
        .await
        .unwrap();
    let _: () = redis::cmd("DEL").arg(keys).query_async(conn).await.unwrap();
}

fn app_flush(app: &str, granted: u64, denied: u64, shadow_denied: u64) -> AppFlush {
    AppFlush {
        app: app.to_owned(),
        granted,
        denied,
        shadow_denied,
        unavailable: shadow_denied + 1,
        unknown_policy: 0,
        unauthenticated: 0,
    }
}

#[tokio::test]
async fn a_flush_adds_counts_and_callers_and_sets_each_expiry_once() {
    let prefix = test_prefix("flush");
    let limiter = Limiter::new(&redis_url(), &prefix, Duration::from_secs(5)).unwrap();
    let mut conn = redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let granted: Vec<(String, u64)> = (0..70).map(|i| (format!("user-{i}"), 70 - i)).collect();
    let denied = vec![("bob".to_owned(), 2)];
    let shadow = vec![("eve".to_owned(), 4)];
    let flush = PolicyFlush {
        granted: 10,
        denied: 2,
        shadow_denied: 4,
        unavailable: 5,
        top: TopBatch {
            policy: "p",
            granted: &granted,
            denied: &denied,
            shadow_denied: &shadow,
        },
    };
    let apps = [app_flush("shop", 14, 2, 4)];
    limiter
        .add_flush(MINUTE, std::slice::from_ref(&flush), &apps)
        .await
        .unwrap();

    let (hour, day) = (MINUTE / 60, MINUTE / (24 * 60));
    let minutes = format!("{prefix}:activity:{{p}}:m:{hour}");
    let hours = format!("{prefix}:activity:{{p}}:h:{day}");
    let shadow_minutes = format!("{prefix}:activity:{{p}}:sm:{hour}");
    let top_granted = format!("{prefix}:top:{{p}}:{MINUTE}:g");
    let app_minutes = format!("{prefix}:activity:app:{{shop}}:m:{hour}");
    let slot = 2 * (MINUTE % 60);
    assert_eq!(u32s(&mut conn, &minutes, slot, 2).await, [10, 2]);
    let hour_slot = 2 * (hour % 24);
    assert_eq!(u32s(&mut conn, &hours, hour_slot, 2).await, [10, 2]);
    assert_eq!(u32s(&mut conn, &shadow_minutes, slot / 2, 1).await, [4]);
    assert_eq!(u32s(&mut conn, &app_minutes, slot, 2).await, [14, 2]);
    // The application's would-be denials, apart (and read back out of its grants).
    let app_shadow = format!("{prefix}:activity:app:{{shop}}:sm:{hour}");
    assert_eq!(u32s(&mut conn, &app_shadow, slot / 2, 1).await, [4]);
    let usage = limiter
        .apps_recent_usage(&["shop"], MINUTE, 10)
        .await
        .unwrap();
    assert_eq!(
        (
            usage[0].granted,
            usage[0].denied,
            usage[0].shadow_denied,
            usage[0].unavailable
        ),
        (10, 2, 4, 5)
    );
    // Refusals for want of Redis: per policy and per application, one u32 a minute.
    let refused = format!("{prefix}:activity:{{p}}:um:{hour}");
    assert_eq!(u32s(&mut conn, &refused, slot / 2, 1).await, [5]);
    let app_refused = format!("{prefix}:activity:app:{{shop}}:um:{hour}");
    assert_eq!(u32s(&mut conn, &app_refused, slot / 2, 1).await, [5]);
    // And per hour, for the week's chart.
    let refused_hours = format!("{prefix}:activity:{{p}}:uh:{day}");
    assert_eq!(u32s(&mut conn, &refused_hours, hour_slot / 2, 1).await, [5]);
    let kept: i64 = redis::cmd("ZCARD")
        .arg(&top_granted)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(kept, 64, "trimmed to the 64 highest of 70 callers");
    let top = limiter.top("p", MINUTE, 1, 3).await.unwrap();
    assert_eq!(top.granted[0].key, "user-0");
    assert_eq!(
        (top.denied[0].key.as_str(), top.denied[0].count),
        ("bob", 2)
    );
    assert_eq!(top.shadow_denied[0].count, 4);
    for key in [
        &minutes,
        &hours,
        &shadow_minutes,
        &top_granted,
        &app_minutes,
        &app_shadow,
        &refused,
        &refused_hours,
        &app_refused,
    ] {
        assert!(pttl(&mut conn, key).await > 0, "{key} has an expiry");
    }

    // An expiry already set is left alone by the next flush; a key without one gets it.
    for key in [&minutes, &top_granted] {
        let _: () = redis::cmd("PEXPIRE")
            .arg(key)
            .arg(500_000)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("DEL")
        .arg(&hours)
        .query_async(&mut conn)
        .await
        .unwrap();
    limiter.add_flush(MINUTE, &[flush], &[]).await.unwrap();
    assert_eq!(
        u32s(&mut conn, &minutes, slot, 2).await,
        [20, 4],
        "added, not set"
    );
    assert!(
        pttl(&mut conn, &minutes).await <= 500_000,
        "the set expiry stays"
    );
    assert!(pttl(&mut conn, &top_granted).await <= 500_000);
    assert_eq!(u32s(&mut conn, &hours, hour_slot, 2).await, [10, 2]);
    assert!(
        pttl(&mut conn, &hours).await > 500_000,
        "a key Redis lost comes back with its expiry"
    );

    delete_keys(&mut conn, &prefix).await;
}

/// More policies than one call takes, each with counts and callers of its own: every one
/// is added to its own keys, none to another's.
#[tokio::test]
async fn a_flush_of_many_policies_adds_each_ones_counts_to_its_own_keys() {
    let prefix = test_prefix("flushmany");
    let limiter = Limiter::new(&redis_url(), &prefix, Duration::from_secs(5)).unwrap();
    let mut conn = redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let names: Vec<String> = (0..75).map(|i| format!("p{i}")).collect();
    let callers: Vec<Vec<(String, u64)>> = (0..75u64)
        .map(|i| (0..i % 4).map(|c| (format!("u{i}-{c}"), i + c)).collect())
        .collect();
    let none: Vec<(String, u64)> = Vec::new();
    let flushes: Vec<PolicyFlush<'_>> = (0..75u64)
        .map(|i| PolicyFlush {
            granted: i + 1,
            denied: i % 3,
            shadow_denied: i % 2,
            unavailable: 0,
            top: TopBatch {
                policy: &names[i as usize],
                granted: &callers[i as usize],
                denied: &none,
                shadow_denied: &none,
            },
        })
        .collect();
    limiter.add_flush(MINUTE, &flushes, &[]).await.unwrap();

    let hour = MINUTE / 60;
    let slot = 2 * (MINUTE % 60);
    for i in 0..75u64 {
        let minutes = format!("{prefix}:activity:{{p{i}}}:m:{hour}");
        assert_eq!(
            u32s(&mut conn, &minutes, slot, 2).await,
            [i as i64 + 1, (i % 3) as i64],
            "p{i}"
        );
        let shadow = format!("{prefix}:activity:{{p{i}}}:sm:{hour}");
        let shadow_count = u32s(&mut conn, &shadow, slot / 2, 1).await;
        assert_eq!(shadow_count, [(i % 2) as i64], "p{i}");
        let top = limiter.top(&names[i as usize], MINUTE, 1, 5).await.unwrap();
        let mut got: Vec<(String, u64)> = top
            .granted
            .iter()
            .map(|c| (c.key.clone(), c.count))
            .collect();
        got.sort();
        let mut want = callers[i as usize].clone();
        want.sort();
        assert_eq!(got, want, "p{i}");
    }

    delete_keys(&mut conn, &prefix).await;
}

#[tokio::test]
async fn on_a_cluster_each_policy_is_written_in_its_own_slot() {
    let cluster = LocalCluster::start().await;
    let limiter = Limiter::new(
        &cluster.url(),
        &test_prefix("flush-cluster"),
        Duration::from_secs(5),
    )
    .unwrap();
    // Policies whose hash tags fall on every master, each flushed with its own caller.
    let names: Vec<String> = (0..12).map(|i| format!("spread.{i}")).collect();
    let callers: Vec<Vec<(String, u64)>> = names
        .iter()
        .map(|name| vec![(format!("caller-of-{name}"), 3)])
        .collect();
    let flushes: Vec<PolicyFlush<'_>> = names
        .iter()
        .zip(&callers)
        .map(|(name, callers)| PolicyFlush {
            granted: 3,
            denied: 0,
            shadow_denied: 0,
            unavailable: 0,
            top: TopBatch {
                policy: name,
                granted: callers,
                denied: &[],
                shadow_denied: &[],
            },
        })
        .collect();
    let apps = [app_flush("shop", 30, 0, 0), app_flush("billing", 6, 0, 1)];
    limiter.add_flush(MINUTE, &flushes, &apps).await.unwrap();
    for name in &names {
        let top = limiter.top(name, MINUTE, 1, 5).await.unwrap();
        assert_eq!(top.granted.len(), 1, "{name}: {top:?}");
        assert_eq!(top.granted[0].key, format!("caller-of-{name}"));
        assert_eq!(top.granted[0].count, 3);
    }
    let usage = limiter
        .apps_recent_usage(&["shop", "billing"], MINUTE, 1)
        .await
        .unwrap();
    let read: Vec<(u64, u64, u64, u64)> = usage
        .iter()
        .map(|u: &MinuteCounts| (u.granted, u.denied, u.shadow_denied, u.unavailable))
        .collect();
    assert_eq!(read, [(30, 0, 0, 1), (5, 0, 1, 2)]);
}
