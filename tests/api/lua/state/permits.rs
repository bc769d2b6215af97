//! The permits reported: full when fresh, less what grants took, agreeing with acquires.

use super::{DENIED, FOREVER, GRANTED, PERMIT_MS, Policy, State, window_start};
use crate::lua::scripts::*;

#[tokio::test]
async fn lua_state_fresh_policy_of_every_algorithm_is_full() {
    for algo in Algo::ALL {
        let p = Policy::new(algo, 5).await;
        let state = p.state_without_writes("fresh").await;
        assert_eq!(
            state,
            Some(State {
                current: "5".into(),
                max: 5,
                rate: algo.reported_rate().into(),
                version: 1,
                updated_ms: 0,
                full_in_ms: 0,
                index: algo.index(),
            }),
            "{algo:?}"
        );
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_reports_max_minus_the_permits_taken() {
    for algo in Algo::ALL {
        let p = Policy::new(algo, 10).await;
        let before = p.redis_ms().await;
        assert_eq!(p.acquire(1).await[0], GRANTED, "{algo:?}");
        assert_eq!(p.acquire(2).await[0], GRANTED, "{algo:?}");
        let after = p.redis_ms().await;
        let s = p.state_without_writes("after 3 taken").await.unwrap();
        assert_eq!(
            (s.max, s.rate.as_str(), s.version, s.index),
            (10, algo.reported_rate(), 1, algo.index()),
            "{algo:?} {s:?}"
        );

        // Nothing comes back during the test: 7 permits, give or take a refill of
        // (test duration) / 10^9 ms at RATE.
        let current = s.current();
        match algo {
            TokenBucket => assert!((7.0..7.001).contains(&current), "{algo:?} {s:?}"),
            _ => assert_eq!(s.current, "7", "{algo:?} {s:?}"),
        }

        // Back to full: 3 permits at RATE; the window / lease.
        let full_in = s.full_in_ms;
        let ok = match algo {
            TokenBucket | Gcra => (2 * PERMIT_MS..=3 * PERMIT_MS).contains(&full_in),
            FixedWindow | SlidingLog | Concurrency => (1..=FOREVER).contains(&full_in),
            SlidingWindow => (FOREVER + 1..=2 * FOREVER).contains(&full_in),
        };
        assert!(ok, "{algo:?} full_in_ms {full_in}");

        // The last write: the grant's time where it is stored, the window's start where
        // only that is, nothing for gcra.
        let updated = s.updated_ms;
        match algo {
            TokenBucket | SlidingLog => assert!(
                (before.floor() as i64..=after.floor() as i64).contains(&updated),
                "{algo:?} updated_ms {updated} not in [{before}, {after}]"
            ),
            // The lease's expiry less its TTL: a double near 2.6 x 10^12 keeps ~0.5 µs, so
            // the acquire's time can come back a hair early, across a ms boundary.
            Concurrency => assert!(
                (before.floor() as i64 - 1..=after.floor() as i64).contains(&updated),
                "{algo:?} updated_ms {updated} not in [{before}, {after}]"
            ),
            FixedWindow | SlidingWindow => {
                assert_eq!(updated, window_start(before, FOREVER), "{algo:?}")
            }
            Gcra => assert_eq!(updated, 0, "{algo:?}"),
        }
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_agrees_with_what_an_acquire_grants() {
    for algo in Algo::ALL {
        let p = Policy::new(algo, 10).await;
        assert_eq!(p.acquire(4).await[0], GRANTED, "{algo:?}");
        let s = p.state_of_configured().await;
        let can_take = s.current().floor() as i64;
        assert_eq!(can_take, 6, "{algo:?} {s:?}");

        // One more than the state says is denied (and changes nothing), exactly as many is
        // granted.
        let denied = p.acquire(can_take + 1).await;
        assert_eq!(denied[0], DENIED, "{algo:?} {denied:?}");
        let again = p.state_of_configured().await;
        assert_eq!(
            again.current().floor() as i64,
            can_take,
            "{algo:?} {again:?}"
        );
        let granted = p.acquire(can_take).await;
        assert_eq!(granted[..2], [GRANTED, 0], "{algo:?} {granted:?}");

        let s = p.state_without_writes("used up").await.unwrap();
        assert!(s.current() < 0.001, "{algo:?} {s:?}");
        assert!(s.full_in_ms > 0, "{algo:?} {s:?}");
        // The acquire script's own reset_after_ms, read a moment earlier, is no sooner.
        assert!(s.full_in_ms <= granted[3], "{algo:?} {s:?} {granted:?}");
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_concurrency_release_gives_the_permit_back() {
    let p = Policy::new(Concurrency, 5).await;
    assert_eq!(p.acquire_as(2, "lease-a").await[0], GRANTED);
    assert_eq!(p.acquire_as(1, "lease-b").await[0], GRANTED);
    let s = p.state_of_configured().await;
    assert_eq!((s.current.as_str(), s.index), ("2", 5), "{s:?}");
    assert!(s.full_in_ms > 0, "{s:?}");

    assert_eq!(p.release("lease-a").await[..3], [GRANTED, 4, 2]);
    let s = p.state_without_writes("lease-a released").await.unwrap();
    assert_eq!(s.current, "4", "{s:?}");
    assert!(
        (1..=FOREVER).contains(&s.full_in_ms),
        "lease-b still held: {s:?}"
    );

    assert_eq!(p.release("lease-b").await[..3], [GRANTED, 5, 1]);
    let s = p.state_without_writes("all released").await.unwrap();
    assert_eq!(
        (s.current.as_str(), s.full_in_ms, s.updated_ms),
        ("5", 0, 0),
        "{s:?}"
    );
    p.delete().await;
}
