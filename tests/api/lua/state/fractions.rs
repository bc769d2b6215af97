//! Fractions of a permit: a partly refilled bucket, the GCRA burst, a sliding window.

use super::{DENIED, FOREVER, GRANTED, PERMIT_MS, Policy, window_start};
use crate::lua::scripts::*;

#[tokio::test]
async fn lua_state_reports_fractions_and_the_gcra_burst() {
    // A token bucket holding 2.5 tokens as of now: 2.5 (and a hair), 7.5 permits to refill.
    let p = Policy::new(TokenBucket, 10).await;
    let now = p.redis_ms().await;
    p.hset(&p.key, "curr_permits", "2.5".into()).await;
    p.hset(&p.key, "last_mill_second", format!("{now}")).await;
    let s = p.state_without_writes("2.5 tokens").await.unwrap();
    assert!((2.5..2.501).contains(&s.current()), "{s:?}");
    assert!(
        (7 * PERMIT_MS..=7 * PERMIT_MS + PERMIT_MS / 2).contains(&s.full_in_ms),
        "{s:?}"
    );
    assert_eq!(s.updated_ms, now.floor() as i64, "{s:?}");
    p.delete().await;

    // GCRA with tat 2.5 emission intervals ahead: a burst of floor(10 - 2.5) = 7 is left.
    let p = Policy::new(Gcra, 10).await;
    let now = p.redis_ms().await;
    let tat = now + 2.5 * PERMIT_MS as f64;
    p.hset(&p.key, "tat", format!("{tat}")).await;
    let s = p.state_without_writes("tat ahead").await.unwrap();
    assert_eq!(s.current, "7", "{s:?}");
    assert!(
        (2 * PERMIT_MS..=5 * PERMIT_MS / 2).contains(&s.full_in_ms),
        "{s:?}"
    );
    assert_eq!(p.acquire(8).await[0], DENIED);
    assert_eq!(p.acquire(7).await[..2], [GRANTED, 0]);
    p.delete().await;

    // Sliding window: 4 granted in the previous window, now part way through this one.
    let p = Policy::new(SlidingWindow, 10).await;
    let now = p.redis_ms().await;
    let start = window_start(now, FOREVER);
    p.hset(&p.key, "sw_start", (start - FOREVER).to_string())
        .await;
    p.hset(&p.key, "sw_curr", "4".into()).await;
    let s = p
        .state_without_writes("previous window used")
        .await
        .unwrap();
    let weight = 1.0 - (now - start as f64) / FOREVER as f64;
    let expected = 10.0 - 4.0 * weight;
    assert!(
        (s.current() - expected).abs() < 0.001,
        "{s:?}, expected about {expected}"
    );
    assert_ne!(s.current().fract(), 0.0, "{s:?}");
    assert!((1..=FOREVER).contains(&s.full_in_ms), "{s:?}");
    assert_eq!(s.updated_ms, start - FOREVER, "{s:?}");
    p.delete().await;
}
