//! State that has aged out counts for nothing, whatever the algorithm.

use super::{GRANTED, PERMIT_MS, Policy, window_start};
use crate::lua::scripts::*;

#[tokio::test]
async fn lua_state_aged_out_state_counts_for_nothing() {
    for algo in Algo::ALL {
        // Windows / leases of 1 s, every trace of use an hour old or more.
        let p = Policy::with_span(algo, 5, 1000).await;
        let now = p.redis_ms().await;
        let hour_ago = now - 3_600_000.0;
        match algo {
            TokenBucket => {
                p.hset(&p.key, "curr_permits", "0".into()).await;
                // Enough time for 5 permits at RATE.
                let long_ago = now - 6.0 * PERMIT_MS as f64;
                p.hset(&p.key, "last_mill_second", format!("{long_ago}"))
                    .await;
            }
            Gcra => p.hset(&p.key, "tat", format!("{hour_ago}")).await,
            FixedWindow => {
                let fw = p.state_key("fw");
                let old = window_start(hour_ago, 1000);
                p.hset(&fw, "start", old.to_string()).await;
                p.hset(&fw, "count", "5".into()).await;
            }
            SlidingLog => {
                let score = format!("{}", (hour_ago * 1000.0).floor() as i64);
                p.zadd(&p.state_key("log"), score, "old:1").await;
            }
            SlidingWindow => {
                let old = window_start(hour_ago, 1000);
                p.hset(&p.key, "sw_start", old.to_string()).await;
                p.hset(&p.key, "sw_curr", "5".into()).await;
                p.hset(&p.key, "sw_prev", "5".into()).await;
            }
            Concurrency => {
                let score = format!("{hour_ago}");
                p.zadd(&p.state_key("leases"), score, "shop|old|1").await;
            }
        }
        let s = p.state_without_writes("aged out").await.unwrap();
        assert_eq!(
            (s.current.as_str(), s.full_in_ms),
            ("5", 0),
            "{algo:?} {s:?}"
        );
        let updated = s.updated_ms;
        let ok = match algo {
            // The last write is still known, however old.
            TokenBucket => updated < hour_ago as i64,
            SlidingLog => updated == hour_ago.floor() as i64,
            SlidingWindow => updated == window_start(hour_ago, 1000),
            Concurrency => updated == (hour_ago - p.span_ms as f64).floor() as i64,
            // A counter of a window that is over counts for nothing; gcra keeps no time.
            FixedWindow | Gcra => updated == 0,
        };
        assert!(
            ok,
            "{algo:?} updated_ms {updated} (an hour ago: {hour_ago})"
        );
        assert_eq!(p.acquire(5).await[..2], [GRANTED, 0], "{algo:?}");
        p.delete().await;
    }
}
