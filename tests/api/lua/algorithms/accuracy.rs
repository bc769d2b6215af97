//! Accuracy: 32 concurrent clients for a few seconds, counted against what the algorithm
//! allows over the span measured on Redis' clock (never the client's), so that the counts
//! hold however fast or loaded the machine is. The rates are 200 per second: small next to
//! what 32 clients ask for even on a loaded 2-core machine (thousands per second).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Config, DENIED, GRANTED, Policy};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

const TASKS: usize = 32;
const HAMMER: Duration = Duration::from_millis(2500);

struct Run {
    granted: u64,
    denied: u64,
    start_us: i64,
    end_us: i64,
}

impl Run {
    fn span_ms(&self) -> f64 {
        (self.end_us - self.start_us) as f64 / 1000.0
    }

    /// Aligned windows of `window_ms` that the span touches.
    fn windows(&self, window_ms: i64) -> i64 {
        (self.end_us / 1000) / window_ms - (self.start_us / 1000) / window_ms + 1
    }

    fn report(&self, name: &str, lowest: f64, highest: f64) {
        eprintln!(
            "{name}: granted {} denied {} over {:.0} ms (Redis time); allowed {lowest:.0}..={highest:.0}",
            self.granted,
            self.denied,
            self.span_ms()
        );
        let granted = self.granted as f64;
        assert!(
            granted <= highest,
            "{name}: granted {granted} > allowance {highest}"
        );
        assert!(
            granted >= lowest,
            "{name}: granted {granted} < allowance less tolerance {lowest}"
        );
    }
}

/// TASKS clients asking for one permit at a time until the deadline, counting only.
async fn hammer(p: &Policy) -> Run {
    let granted = Arc::new(AtomicU64::new(0));
    let denied = Arc::new(AtomicU64::new(0));
    let start_us = p.redis_us().await;
    let deadline = Instant::now() + HAMMER;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (p, granted, denied) = (p.clone(), granted.clone(), denied.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let reply = p.acquire(1, "shop").await;
                match reply[0] {
                    GRANTED => granted.fetch_add(1, Ordering::Relaxed),
                    DENIED => denied.fetch_add(1, Ordering::Relaxed),
                    _ => panic!("{:?}: {reply:?}", p.algo),
                };
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let end_us = p.redis_us().await;
    Run {
        granted: granted.load(Ordering::Relaxed),
        denied: denied.load(Ordering::Relaxed),
        start_us,
        end_us,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_token_bucket() {
    // Bursts of 200, 200 per second. Allowed: 200 + 200/s * span (the bucket starts full
    // at the first call). Tolerance 10% (70 permits, 350 ms of refill): a pause of the
    // clients loses nothing unless it outlasts the 1 s a full bucket holds; what is lost is
    // the time before the first call and after the last one, a few ms.
    let p = Policy::new(Config::of(TokenBucket, 200).every(5)).await;
    let run = hammer(&p).await;
    let allowed = 200.0 + 200.0 * run.span_ms() / 1000.0;
    run.report("token_bucket", allowed * 0.9, allowed + 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_gcra() {
    // Same contract as the token bucket: bursts of 200, 200 per second, the same 10%
    // tolerance for the same reasons (a fresh tat counts from the first call).
    let p = Policy::new(Config::of(Gcra, 200).every(5)).await;
    let run = hammer(&p).await;
    let allowed = 200.0 + 200.0 * run.span_ms() / 1000.0;
    run.report("gcra", allowed * 0.9, allowed + 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_fixed_window() {
    // 40 per 200 ms window (200 per second). Allowed: 40 per aligned window touched.
    // Tolerance: the first and the last window, cut by the start and the stop, may be too
    // short to fill (every window in between fills in its first few ms).
    const W: i64 = 200;
    let p = Policy::new(Config::of(FixedWindow, 40).every(W)).await;
    let run = hammer(&p).await;
    let windows = run.windows(W);
    run.report(
        "fixed_window",
        (40 * (windows - 2)) as f64,
        (40 * windows) as f64,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_sliding_log() {
    // 40 per any 200 ms. Any half-open interval of 200 ms holds at most 40 grants, and
    // floor(span / 200) + 1 of them cover the span. Tolerance: three windows' worth (120
    // of 520). Each of the 40 slots is taken again only a round trip after its grant leaves
    // the window, so its cycle is 200 ms + a round trip, about 13 cycles in a run: at 10 ms
    // a round trip (measured with two busy loops beside the test) that is one cycle fewer,
    // and the last cycle is cut by the stop. A sliding log that counted denials (the seed's
    // bug) or anything else twice would fall far below.
    const W: i64 = 200;
    let p = Policy::new(Config::of(SlidingLog, 40).every(W)).await;
    let log = p.state_key("log");
    // A watcher checks the log's size all along: never above max_permits.
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (p, stop, log) = (p.clone(), stop.clone(), log.clone());
        tokio::spawn(async move {
            let mut checks = 0u64;
            let mut largest = 0;
            while !stop.load(Ordering::Relaxed) {
                let n = p.zcard(&log).await;
                assert!(n <= 40, "the log holds {n} > 40");
                largest = largest.max(n);
                checks += 1;
            }
            (checks, largest)
        })
    };
    let run = hammer(&p).await;
    stop.store(true, Ordering::Relaxed);
    let (checks, largest) = watcher.await.unwrap();
    eprintln!("sliding_log: {checks} ZCARD checks, largest {largest}");
    let allowed = (40 * ((run.end_us - run.start_us) / 1000 / W + 1)) as f64;
    run.report("sliding_log", allowed - 120.0, allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_sliding_window() {
    // 40 per 200 ms. Allowed: at most 40 in any aligned window (the guarantee the
    // approximation keeps). Tolerance: the first and last windows (cut), and 10% for the
    // approximation, which under steady load admits a little less than a full window.
    const W: i64 = 200;
    let p = Policy::new(Config::of(SlidingWindow, 40).every(W)).await;
    let run = hammer(&p).await;
    let windows = run.windows(W);
    let highest = (40 * windows) as f64;
    run.report("sliding_window", (40 * (windows - 2)) as f64 * 0.9, highest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_concurrency() {
    // At most 8 leases at once. Each client acquires, counts itself in, lets the others
    // run, counts itself out, then releases: the client-side count lies inside the
    // Redis-side lease, so its peak can never exceed a correct limit.
    const MAX: i64 = 8;
    let p = Policy::new(Config::of(Concurrency, MAX)).await;
    let held = Arc::new(AtomicI64::new(0));
    let peak = Arc::new(AtomicI64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let denied = Arc::new(AtomicU64::new(0));
    // The fewest permits left after a grant: 0 when Redis held all MAX at once.
    let fewest_left = Arc::new(AtomicI64::new(MAX));
    let deadline = Instant::now() + HAMMER;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let p = p.clone();
        let (held, peak, granted, denied, fewest_left) = (
            held.clone(),
            peak.clone(),
            granted.clone(),
            denied.clone(),
            fewest_left.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                let lease = random_suffix();
                let reply = p.acquire_lease(1, "shop", &lease).await;
                if reply[0] == DENIED {
                    // Denied only when every permit was held.
                    assert_eq!(reply[1], 0, "denied with permits free: {reply:?}");
                    denied.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                assert_eq!(reply[0], GRANTED, "{reply:?}");
                granted.fetch_add(1, Ordering::Relaxed);
                fewest_left.fetch_min(reply[1], Ordering::Relaxed);
                let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::task::yield_now().await;
                held.fetch_sub(1, Ordering::SeqCst);
                let released = p.release("shop", &lease).await;
                assert_eq!(released[..3], [GRANTED, released[1], 1], "{released:?}");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let (granted, denied) = (
        granted.load(Ordering::Relaxed),
        denied.load(Ordering::Relaxed),
    );
    let peak = peak.load(Ordering::SeqCst);
    let fewest_left = fewest_left.load(Ordering::Relaxed);
    eprintln!(
        "concurrency: granted {granted} denied {denied}, client-side peak {peak}, fewest left {fewest_left}"
    );
    assert!(peak <= MAX, "{peak} leases held at once");
    assert!(granted > 0);
    assert_eq!(fewest_left, 0, "32 clients never filled 8 slots");
    assert!(denied > 0, "32 clients never found the 8 slots full");
    assert_eq!(
        p.zcard(&p.state_key("leases")).await,
        0,
        "every lease was given back"
    );
}
