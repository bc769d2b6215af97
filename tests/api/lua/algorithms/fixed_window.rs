//! The fixed window script: a counter that always carries a TTL, fresh each window.

use redis::FromRedisValue;

use super::{Config, DENIED, GRANTED, LONG, Policy, Reply};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

impl Policy {
    /// One acquire and the counter's PTTL read right after it, in one MULTI/EXEC (nothing
    /// runs in between, however slow the client): the reply, the TTL, and the whole ms
    /// Redis' clock may have turned between the two (by the clock read around them).
    async fn acquire_then_pttl(&self, permits: i64) -> (Reply, i64, i64) {
        let fw = self.state_key("fw");
        let acquire = self.acquire_cmd(FixedWindow, permits, "shop", &random_suffix());
        let (before, values, after) = self
            .atomically(vec![acquire, redis::cmd("PTTL").arg(&fw).clone()])
            .await;
        (
            Reply::from_redis_value(values[0].clone()).unwrap(),
            i64::from_redis_value(values[1].clone()).unwrap(),
            (after - before + 999) / 1000,
        )
    }

    /// The counter's window start and count.
    async fn counter(&self) -> (i64, i64) {
        let (start, count): (Option<i64>, Option<i64>) = self
            .query(
                redis::cmd("HMGET")
                    .arg(self.state_key("fw"))
                    .arg("start")
                    .arg("count"),
            )
            .await;
        (start.expect("a window start"), count.expect("a count"))
    }
}

/// The TTL a grant leaves: the time to its window's end (`reset_after_ms`, at least 1),
/// less the time the clock turned until the PTTL (`turned_ms`, plus 1 for the rounding
/// of both to the ms).
#[track_caller]
fn assert_ttl_after_grant(reply: &Reply, ttl: i64, turned_ms: i64) {
    let to_end = reply[3].max(1);
    assert!(
        (to_end - 1 - turned_ms..=to_end).contains(&ttl),
        "PTTL {ttl} after {reply:?}"
    );
}

#[tokio::test]
async fn fixed_window_counter_always_carries_a_ttl() {
    let p = Policy::new(Config::of(FixedWindow, 3)).await;
    let fw = p.state_key("fw");
    assert_eq!(p.exists(&fw).await, 0, "nothing before the first call");
    for (permits, code) in [(2, GRANTED), (1, GRANTED), (1, DENIED), (3, DENIED)] {
        let (reply, ttl, turned_ms) = p.acquire_then_pttl(permits).await;
        assert_eq!(reply[0], code, "{reply:?}");
        assert!((1..=LONG).contains(&ttl), "PTTL {ttl} after {reply:?}");
        // The counter dies with its window, which is what reset_after_ms says.
        assert!(ttl <= reply[3] + 1, "PTTL {ttl} vs {reply:?}");
        if code == GRANTED {
            assert_ttl_after_grant(&reply, ttl, turned_ms);
        }
    }

    // Windows that ended, made on Redis' clock rather than waited for: the counter of the
    // window before, used up, with its TTL still running, or (as the seeds' INCR-then-
    // EXPIRE left one after a crash) with none at all. Either way the next grant counts
    // afresh in the current window and leaves the counter with the TTL of that window.
    for persist in [false, true] {
        let (start, _) = p.counter().await;
        p.query::<i64>(
            redis::cmd("HSET")
                .arg(&fw)
                .arg("start")
                .arg(start - LONG)
                .arg("count")
                .arg(3),
        )
        .await;
        if persist {
            p.query::<i64>(redis::cmd("PERSIST").arg(&fw)).await;
            assert_eq!(p.pttl(&fw).await, -1);
        }
        let (reply, ttl, turned_ms) = p.acquire_then_pttl(1).await;
        assert_eq!(reply[..2], [GRANTED, 2], "a fresh window: {reply:?}");
        assert_ttl_after_grant(&reply, ttl, turned_ms);
        let (new_start, count) = p.counter().await;
        assert_eq!(
            (new_start, count),
            (start, 1),
            "counted in the current window"
        );
        // Used up again, for the next round.
        assert_eq!(p.acquire(2, "shop").await[..2], [GRANTED, 0]);
    }

    // Windows of 20 ms, crossed as often as the machine manages: at every moment the key
    // has a TTL or is gone, and each grant leaves the TTL of its window (read in the same
    // MULTI/EXEC, so the check holds however many windows pass between two calls).
    let p = Policy::new(Config::of(FixedWindow, 3).every(20)).await;
    for _ in 0..300 {
        let (reply, ttl, turned_ms) = p.acquire_then_pttl(1).await;
        assert_ne!(ttl, -1, "a counter without a TTL");
        assert!(ttl <= 20, "PTTL {ttl} beyond the window");
        match reply[0] {
            GRANTED => assert_ttl_after_grant(&reply, ttl, turned_ms),
            DENIED => assert!((0..=reply[3] + 1).contains(&ttl), "{ttl} {reply:?}"),
            _ => panic!("{reply:?}"),
        }
    }
}

#[tokio::test]
async fn fixed_window_denials_leave_the_count_and_the_next_window_starts_afresh() {
    // Windows of an hour: the denials below fall in the window of the grant. When that
    // window ends is read on Redis' clock, and its end is made on it, never waited for.
    let p = Policy::new(Config::of(FixedWindow, 4)).await;
    assert_eq!(p.acquire(4, "shop").await[..2], [GRANTED, 0]);
    let (start, count) = p.counter().await;
    assert_eq!(count, 4);
    assert_eq!(start % LONG, 0, "windows are aligned on Redis time");
    let end_us = (start + LONG) * 1000;
    for _ in 0..10 {
        let denied = p.timed_acquire(1).await;
        let reply = &denied.reply;
        assert_eq!(reply[..2], [DENIED, 0], "{denied:?}");
        assert_eq!(reply[2], reply[3], "both are the time to the next window");
        // The time to the window's end, rounded up to the ms, at the script's moment.
        assert!(
            reply[2] * 1000 >= end_us - denied.after_us
                && (reply[2] - 1) * 1000 < end_us - denied.before_us,
            "retry_after_ms {} for a window ending {} µs after the call",
            reply[2],
            end_us - denied.before_us
        );
        assert_eq!(p.counter().await, (start, 4), "the denial consumed nothing");
    }

    // The window ends: its counter now belongs to the window before (as it does once
    // Redis' clock passes its end). The next window counts from 0.
    p.query::<i64>(
        redis::cmd("HSET")
            .arg(p.state_key("fw"))
            .arg("start")
            .arg(start - LONG),
    )
    .await;
    assert_eq!(p.acquire(1, "shop").await[..2], [GRANTED, 3]);
    assert_eq!(p.counter().await, (start, 1));
}
