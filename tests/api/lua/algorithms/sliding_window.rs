//! The sliding window script: the previous window weighted by what is left of it.

use super::{Config, Policy};
use crate::lua::scripts::*;

#[tokio::test]
async fn sliding_window_weights_the_previous_window_by_what_is_left_of_it() {
    const W: i64 = 60_000;
    // Retried when a window boundary falls inside the measurement (once a minute).
    for _attempt in 0..3 {
        let mut c = Config::of(SlidingWindow, 100);
        c.window_ms = Some(W);
        let p = Policy::new(c).await;
        let t0 = p.redis_us().await / 1000;
        let start = t0 - t0 % W;
        // The previous window granted 100: at elapsed e, 100 * e / W of it have "left".
        p.set_field("sw_start", (start - W).to_string()).await;
        p.set_field("sw_curr", "100".to_owned()).await;
        p.set_field("sw_prev", "0".to_owned()).await;
        let granted = p.use_up(200).await as i64;
        let t1 = p.redis_us().await / 1000;
        if t1 - t1 % W != start {
            continue;
        }
        // Granted while 100 * (1 - e / W) + n <= 100, i.e. n <= 100 * e / W, for e between
        // the two readings of the clock (1 ms for their rounding).
        let (e0, e1) = (t0 - start, t1 - start + 1);
        assert!(
            (100 * e0 / W - 1..=100 * e1 / W).contains(&granted),
            "granted {granted} at elapsed {e0}..{e1} ms of {W}"
        );
        if granted > 0 {
            assert_eq!(p.field("sw_prev").await.as_deref(), Some("100"));
            assert_eq!(p.field("sw_curr").await, Some(granted.to_string()));
        }
        // Two windows ago is forgotten altogether: a full window again.
        p.set_field("sw_start", (start - 2 * W).to_string()).await;
        assert_eq!(p.use_up(200).await, 100);
        return;
    }
    panic!("a window boundary in each of three attempts");
}
