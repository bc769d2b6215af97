//! The fixed window script: a counter that always carries a TTL, fresh each window.

use super::{Config, DENIED, GRANTED, LONG, Policy};
use crate::lua::scripts::*;

#[tokio::test]
async fn fixed_window_counter_always_carries_a_ttl() {
    let p = Policy::new(Config::of(FixedWindow, 3)).await;
    let fw = p.state_key("fw");
    assert_eq!(p.exists(&fw).await, 0, "nothing before the first call");
    for (permits, code) in [(2, GRANTED), (1, GRANTED), (1, DENIED), (3, DENIED)] {
        let reply = p.acquire(permits, "shop").await;
        assert_eq!(reply[0], code, "{reply:?}");
        let ttl = p.pttl(&fw).await;
        assert!((1..=LONG).contains(&ttl), "PTTL {ttl} after {reply:?}");
        // The counter dies with its window, which is what reset_after_ms says.
        assert!(ttl <= reply[3] + 1, "PTTL {ttl} vs {reply:?}");
    }
    // Windows of 20 ms, crossed many times: at every moment the key has a TTL or is gone.
    let p = Policy::new(Config::of(FixedWindow, 3).every(20)).await;
    let fw = p.state_key("fw");
    let mut seen_ttl = 0;
    for _ in 0..300 {
        let reply = p.acquire(1, "shop").await;
        assert!(reply[0] == GRANTED || reply[0] == DENIED, "{reply:?}");
        let ttl = p.pttl(&fw).await;
        assert_ne!(ttl, -1, "a counter without a TTL");
        assert!(ttl <= 20, "PTTL {ttl} beyond the window");
        if ttl > 0 {
            seen_ttl += 1;
        }
    }
    assert!(seen_ttl > 0);
}

#[tokio::test]
async fn fixed_window_denials_leave_the_count_and_the_next_window_starts_afresh() {
    let p = Policy::new(Config::of(FixedWindow, 4).every(200)).await;
    let fw = p.state_key("fw");
    assert_eq!(p.acquire(4, "shop").await[..2], [GRANTED, 0]);
    let count: Option<String> = p.query(redis::cmd("HGET").arg(&fw).arg("count")).await;
    assert_eq!(count.as_deref(), Some("4"));
    let start: i64 = p
        .query::<String>(redis::cmd("HGET").arg(&fw).arg("start"))
        .await
        .parse()
        .unwrap();
    assert_eq!(start % 200, 0, "windows are aligned on Redis time");
    for _ in 0..10 {
        let reply = p.acquire(1, "shop").await;
        if reply[0] == GRANTED {
            // The window ended meanwhile: a new one counts from 0.
            assert_eq!(reply[1], 3);
            return;
        }
        assert_eq!(reply[..2], [DENIED, 0]);
        assert_eq!(reply[2], reply[3], "both are the time to the next window");
        let count: Option<String> = p.query(redis::cmd("HGET").arg(&fw).arg("count")).await;
        assert_eq!(count.as_deref(), Some("4"), "the denial consumed nothing");
    }
}
