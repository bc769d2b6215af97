//! The sliding log script: one member per granted permit, none for denials.

use std::time::{Duration, Instant};

use super::{Config, DENIED, GRANTED, LONG, Policy, Reply};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

#[tokio::test]
async fn sliding_log_keeps_one_member_per_granted_permit_and_nothing_for_denials() {
    let p = Policy::new(Config::of(SlidingLog, 5)).await;
    let log = p.state_key("log");
    // Two permits of one grant share one microsecond and are still two members.
    assert_eq!(p.acquire(2, "shop").await[..2], [GRANTED, 3]);
    let members = p.zrange(&log).await;
    assert_eq!(members.len(), 4, "two members with scores: {members:?}");
    assert_eq!(members[1], members[3], "the same score");
    assert_ne!(members[0], members[2]);
    // Three grants in one MULTI/EXEC run back to back, in the same millisecond as a rule:
    // three more members.
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..3 {
        pipe.cmd("EVAL")
            .arg(SLIDING_LOG.source())
            .arg(2)
            .arg(&p.key)
            .arg(&log)
            .arg(1)
            .arg("shop")
            .arg(random_suffix());
    }
    let mut conn = p.conn.clone();
    let replies: Vec<Reply> = pipe.query_async(&mut conn).await.unwrap();
    let codes: Vec<i64> = replies.iter().map(|r| r[0]).collect();
    assert_eq!(codes, [GRANTED; 3], "{replies:?}");
    assert_eq!(p.zcard(&log).await, 5);
    let ttl = p.pttl(&log).await;
    assert!(
        (1..=LONG + 1).contains(&ttl),
        "the log expires with its window: {ttl}"
    );
    // Denials add nothing: the log stays as it is, whatever the number of attempts.
    let before = p.zrange(&log).await;
    for permits in [1, 1, 3, 5, 1] {
        let reply = p.acquire(permits, "shop").await;
        assert_eq!(reply[..2], [DENIED, 0]);
        assert!((1..=LONG).contains(&reply[2]), "{reply:?}");
        assert!(reply[3] >= reply[2], "{reply:?}");
    }
    assert_eq!(p.zrange(&log).await, before);
    assert_eq!(p.zcard(&log).await, 5, "never more than max_permits");
}

#[tokio::test]
async fn sliding_log_denials_never_lock_a_busy_client_out() {
    // 3 per 300 ms. A client that keeps asking while denied is granted again as soon as
    // its first grant leaves the window: its denials were never counted (the seed's were,
    // and a client asking faster than the window never got through again).
    const W: i64 = 300;
    let p = Policy::new(Config::of(SlidingLog, 3).every(W)).await;
    let log = p.state_key("log");
    assert_eq!(p.acquire(1, "shop").await[0], GRANTED);
    let first_by = p.redis_us().await;
    assert_eq!(p.acquire(2, "shop").await[0], GRANTED);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut denied = 0;
    loop {
        let asked_at = p.redis_us().await;
        let reply = p.acquire(1, "shop").await;
        assert!(p.zcard(&log).await <= 3, "never more than max_permits");
        if reply[0] == GRANTED {
            break;
        }
        assert_eq!(reply[0], DENIED);
        denied += 1;
        // 1 ms for the rounding of scores to the microsecond and of windows to the ms.
        assert!(
            asked_at < first_by + W * 1000 + 1000,
            "denied after the first grant left the window ({denied} denials before)"
        );
        assert!(Instant::now() < deadline, "locked out");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
