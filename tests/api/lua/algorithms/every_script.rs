//! What every acquire script shares: limits, missing policies, membership, retry times.

use std::time::{Duration, Instant};

use super::{
    ABOVE_MAX, Config, DENIED, GRANTED, LONG, NO_POLICY, NOT_ALLOWED, OTHER_ALGORITHM, Policy,
    UNENFORCED,
};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

#[tokio::test]
async fn every_script_grants_max_permits_then_denies_without_consuming() {
    for algo in Algo::ALL {
        let p = Policy::new(Config::of(algo, 5)).await;
        let first = p.acquire(1, "shop").await;
        assert_eq!(first[..3], [GRANTED, 4, 0], "{algo:?} first call {first:?}");
        assert_eq!(first[4..], [5, 1], "{algo:?} max_permits and version");
        // Time until nothing is used any more: a permit at 0.001/s, or the window / lease.
        let reset = first[3];
        let ok = match algo {
            TokenBucket | Gcra => (1_000_000..=1_000_001).contains(&reset),
            FixedWindow => (1..=LONG).contains(&reset),
            SlidingLog => reset == LONG,
            SlidingWindow => (LONG..=2 * LONG).contains(&reset),
            Concurrency => (LONG..=LONG + 1).contains(&reset),
        };
        assert!(ok, "{algo:?} reset_after_ms {reset}");
        for remaining in (0..4).rev() {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..2], [GRANTED, remaining], "{algo:?} {reply:?}");
        }
        let before = p.snapshot().await;
        for _ in 0..10 {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..2], [DENIED, 0], "{algo:?} {reply:?}");
            let retry = reply[2];
            let ok = match algo {
                TokenBucket | Gcra => (1..=1_000_001).contains(&retry),
                FixedWindow | SlidingLog => (1..=LONG).contains(&retry),
                SlidingWindow => (1..=2 * LONG).contains(&retry),
                Concurrency => (1..=LONG + 1).contains(&retry),
            };
            assert!(ok, "{algo:?} retry_after_ms {retry}");
            assert!(reply[3] >= retry, "{algo:?} reset before retry: {reply:?}");
        }
        assert_eq!(
            p.snapshot().await,
            before,
            "{algo:?}: a denial wrote nothing"
        );
    }
}

#[tokio::test]
async fn every_script_answers_no_policy_for_a_missing_key() {
    let p = Policy::new(Config::of(TokenBucket, 5)).await;
    let missing = Policy {
        key: format!("{}-missing", p.key),
        ..p.clone()
    };
    for algo in Algo::ALL {
        let reply = missing.run(algo, 1, "shop", "id").await;
        assert_eq!(reply, vec![NO_POLICY, 0, 0, 0, 0, 0], "{algo:?}");
    }
}

#[tokio::test]
async fn every_script_checks_membership_exactly_not_as_a_pattern() {
    for algo in Algo::ALL {
        let mut c = Config::of(algo, 100);
        c.apps = ",myapp,my-app,";
        let p = Policy::new(c).await;
        for app in ["app", "my", "a[", "my.app", "my%-app", ""] {
            let reply = p.acquire(1, app).await;
            assert_eq!(
                reply,
                vec![NOT_ALLOWED, 0, 0, 0, 100, 1],
                "{algo:?} app {app:?}"
            );
        }
        assert_eq!(p.acquire(1, "my-app").await[0], GRANTED, "{algo:?}");
        assert_eq!(p.acquire(1, "myapp").await[0], GRANTED, "{algo:?}");
    }
}

#[tokio::test]
async fn every_script_refuses_permits_outside_one_to_max() {
    for algo in Algo::ALL {
        let p = Policy::new(Config::of(algo, 3)).await;
        for permits in [4, 0, -2, 1000] {
            let reply = p.acquire(permits, "shop").await;
            assert_eq!(reply, vec![ABOVE_MAX, 0, 0, 0, 3, 1], "{algo:?} {permits}");
        }
        assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0], "{algo:?}");
    }
}

#[tokio::test]
async fn a_script_of_another_algorithm_answers_minus_4_with_the_index() {
    for policy_algo in Algo::ALL {
        let p = Policy::new(Config::of(policy_algo, 5)).await;
        for script in Algo::ALL {
            let reply = p.run(script, 1, "shop", &random_suffix()).await;
            if script == policy_algo {
                assert_eq!(reply[0], GRANTED, "{script:?} on its own policy");
            } else {
                assert_eq!(
                    reply,
                    vec![OTHER_ALGORITHM, policy_algo.index(), 0, 0, 0, 1],
                    "{script:?} on a {policy_algo:?} policy"
                );
            }
        }
    }
    // A hash written by the six-argument sync (no `algorithm` field) is a token bucket.
    let mut c = Config::of(TokenBucket, 5);
    let p = Policy::new(c.clone()).await;
    c.version = 2;
    assert_eq!(p.sync_six(&c, false).await, 1);
    assert_eq!(p.field("algorithm").await, None);
    for script in [FixedWindow, SlidingLog, SlidingWindow, Concurrency, Gcra] {
        let reply = p.run(script, 1, "shop", "id").await;
        assert_eq!(reply, vec![OTHER_ALGORITHM, 1, 0, 0, 0, 2], "{script:?}");
    }
}

#[tokio::test]
async fn a_disabled_policy_grants_unenforced_and_leaves_state_alone() {
    for algo in Algo::ALL {
        let mut c = Config::of(algo, 2);
        let p = Policy::new(c.clone()).await;
        assert_eq!(p.acquire(2, "shop").await[0], GRANTED, "{algo:?}");
        c.version = 2;
        c.enabled = false;
        assert_eq!(p.sync(&c).await.unwrap(), 1);
        let before = p.snapshot().await;
        for _ in 0..5 {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..3], [UNENFORCED, 0, 0], "{algo:?} {reply:?}");
            assert_eq!(reply[4..], [2, 2], "{algo:?} {reply:?}");
        }
        assert_eq!(p.snapshot().await, before, "{algo:?}: state untouched");
        assert_eq!(p.acquire(1, "other").await[0], NOT_ALLOWED, "{algo:?}");
        c.version = 3;
        c.enabled = true;
        assert_eq!(p.sync(&c).await.unwrap(), 1);
        assert_eq!(
            p.acquire(1, "shop").await[0],
            DENIED,
            "{algo:?}: enforced again, still used up"
        );
    }
}

/// A denial's retry_after_ms, checked on Redis' clock in both directions: no call made
/// after the promised time is denied, and the grant never comes before it.
#[tokio::test]
async fn retry_after_is_the_time_a_denied_request_waits() {
    for algo in Algo::ALL {
        // 2 permits per 200 ms window / lease, or 10 per second (gcra, token bucket).
        let ms = if algo.windowed() || algo == Concurrency {
            200
        } else {
            100
        };
        let p = Policy::new(Config::of(algo, 2).every(ms)).await;
        p.use_up(100).await;
        let denied_from = p.redis_us().await;
        let reply = p.acquire(1, "shop").await;
        let denied_by = p.redis_us().await;
        if reply[0] == GRANTED {
            continue; // time moved on between use_up and this call: nothing to measure
        }
        assert_eq!(reply[0], DENIED, "{algo:?}");
        let retry_us = reply[2] * 1000;
        assert!(retry_us > 0, "{algo:?} {reply:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let asked_at = p.redis_us().await;
            let reply = p.acquire(1, "shop").await;
            if reply[0] == GRANTED {
                break;
            }
            assert_eq!(reply[0], DENIED, "{algo:?}");
            // The denial's own time is at most `denied_by`, this call's at least
            // `asked_at`; 1 ms for the rounding of retry_after_ms.
            assert!(
                asked_at < denied_by + retry_us + 1000,
                "{algo:?}: denied {} µs after the promised time",
                asked_at - denied_by - retry_us
            );
            assert!(Instant::now() < deadline, "{algo:?}: never granted");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let granted_by = p.redis_us().await;
        assert!(
            granted_by + 1000 >= denied_from + retry_us,
            "{algo:?}: granted {} µs before the promised time",
            denied_from + retry_us - granted_by
        );
    }
}
