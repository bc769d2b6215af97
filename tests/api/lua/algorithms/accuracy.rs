//! Accuracy: 32 concurrent clients for a few seconds, each call timed on Redis' clock in
//! the same MULTI/EXEC as its script (so its Redis time is known to a few µs, whatever the
//! client's speed). Over-admission is counted against what the algorithm allows over the
//! span Redis saw, exactly. Under-admission is checked against what Redis saw too: every
//! denial must be one the algorithm owed, given the grants before it and when they were
//! made, so a client that stalls (a loaded machine) can only make the checks weaker where
//! it asked less, never fail them. The rates are 200 per second: small next to what 32
//! clients ask for even on a loaded 2-core machine (thousands per second).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Config, DENIED, GRANTED, Policy};
use crate::helpers::random_suffix;
use crate::lua::scripts::*;

const TASKS: usize = 32;
const HAMMER: Duration = Duration::from_millis(2500);

/// One call: granted or denied, and the Redis time (µs) read just before and just after
/// its script, in the same MULTI/EXEC. Redis runs one MULTI/EXEC at a time, so the
/// brackets of two calls never overlap and order the calls as Redis ran them.
#[derive(Debug, Clone, Copy)]
struct Call {
    before_us: i64,
    after_us: i64,
    granted: bool,
}

struct Run {
    /// Every call, in the order Redis ran them.
    calls: Vec<Call>,
    start_us: i64,
    end_us: i64,
}

impl Run {
    fn granted(&self) -> u64 {
        self.calls.iter().filter(|c| c.granted).count() as u64
    }

    fn denied(&self) -> u64 {
        self.calls.len() as u64 - self.granted()
    }

    fn span_ms(&self) -> f64 {
        (self.end_us - self.start_us) as f64 / 1000.0
    }

    /// Aligned windows of `window_ms` that the span touches.
    fn windows(&self, window_ms: i64) -> i64 {
        (self.end_us / 1000) / window_ms - (self.start_us / 1000) / window_ms + 1
    }

    /// `lowest`: the grants that the denials Redis made prove were owed (derived from the
    /// calls, never from how many the client managed to make); `highest`: the most the
    /// algorithm allows over the span.
    fn report(&self, name: &str, lowest: f64, highest: f64) {
        eprintln!(
            "{name}: granted {} denied {} over {:.0} ms (Redis time); proven {lowest:.0}, allowed {highest:.0}",
            self.granted(),
            self.denied(),
            self.span_ms()
        );
        let granted = self.granted() as f64;
        assert!(
            granted <= highest,
            "{name}: granted {granted} > allowance {highest}"
        );
        assert!(
            granted >= lowest,
            "{name}: granted {granted} < {lowest}, the grants its denials prove owed"
        );
        assert!(self.denied() > 0, "{name}: 32 clients were never denied");
    }
}

/// TASKS clients asking for one permit at a time until the deadline, each call timed.
async fn hammer(p: &Policy) -> Run {
    let start_us = p.redis_us().await;
    let deadline = Instant::now() + HAMMER;
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let mut calls = Vec::new();
            while Instant::now() < deadline {
                let call = p.timed_acquire(1).await;
                let granted = match call.reply[0] {
                    GRANTED => true,
                    DENIED => false,
                    _ => panic!("{:?}: {call:?}", p.algo),
                };
                calls.push(Call {
                    before_us: call.before_us,
                    after_us: call.after_us,
                    granted,
                });
            }
            calls
        }));
    }
    let mut calls = Vec::new();
    for task in tasks {
        calls.extend(task.await.unwrap());
    }
    let end_us = p.redis_us().await;
    calls.sort_by_key(|c| c.before_us);
    for pair in calls.windows(2) {
        assert!(
            pair[0].after_us <= pair[1].before_us,
            "two MULTI/EXEC overlapped: {pair:?}"
        );
    }
    Run {
        calls,
        start_us,
        end_us,
    }
}

/// The grants a token bucket (or GCRA) of `capacity`, refilled at `per_s`, certainly made,
/// as its denials prove. A denial means less than one permit was left. From one denial to
/// the next the bucket cannot reach its capacity (and lose refill to the cap) unless
/// (capacity - 1) / rate passed, so between two denials closer than that it granted more
/// than the refill of the time between them, less 1; and before its first denial, more
/// than capacity - 1. Denials further apart (the clients stalled) prove nothing of the time
/// between them.
fn bucket_proven(run: &Run, capacity: f64, per_s: f64) -> f64 {
    let per_us = per_s / 1e6;
    let fill_us = (capacity - 2.0) / per_us;
    let denials: Vec<&Call> = run.calls.iter().filter(|c| !c.granted).collect();
    let Some((&first, rest)) = denials.split_first() else {
        return 0.0;
    };
    // Each term is a lower bound: the times used are the brackets' inner ends.
    let mut proven = capacity - 1.0;
    let (mut since, mut last) = (first, first);
    for &denial in rest {
        if (denial.after_us - last.before_us) as f64 >= fill_us {
            proven += per_us * (last.before_us - since.after_us) as f64 - 1.0;
            since = denial;
        }
        last = denial;
    }
    proven += per_us * (last.before_us - since.after_us) as f64 - 1.0;
    // Float rounding in the scripts (their EPSILON), over thousands of grants.
    proven - 0.01
}

/// Grants per aligned window of `window_ms` as Redis ran the calls, checked call by call: a
/// call whose bracket lies in one window is checked against the grants before it in that
/// window, counted for sure (brackets inside the window) and at most (with the grants
/// whose bracket straddles its edge). `check(k, call, sure, most)` gets the window, the
/// call and both counts for windows k - 1 and k.
/// Returns how many grants straddled a window's edge (each may count in two windows).
fn replay_windows(
    run: &Run,
    window_ms: i64,
    mut check: impl FnMut(i64, &Call, [i64; 2], [i64; 2]),
) -> i64 {
    let window = |us: i64| (us / 1000) / window_ms;
    let mut sure: BTreeMap<i64, i64> = BTreeMap::new();
    let mut straddling: BTreeMap<i64, i64> = BTreeMap::new();
    let mut straddlers = 0;
    for call in &run.calls {
        let (from, to) = (window(call.before_us), window(call.after_us));
        if from == to {
            let k = from;
            let count = |m: &BTreeMap<i64, i64>, k| m.get(&k).copied().unwrap_or(0);
            let sure_k = [count(&sure, k - 1), count(&sure, k)];
            let most_k = [
                sure_k[0] + count(&straddling, k - 1),
                sure_k[1] + count(&straddling, k),
            ];
            check(k, call, sure_k, most_k);
            if call.granted {
                *sure.entry(k).or_default() += 1;
            }
        } else if call.granted {
            straddlers += 1;
            for k in from..=to {
                *straddling.entry(k).or_default() += 1;
            }
        }
    }
    straddlers
}

/// Chooses denials whose proofs cover disjoint stretches (`covers` gives each one's first
/// and last window or µs), greedily from the first: their proofs add up.
fn disjoint(covers: impl IntoIterator<Item = (i64, i64)>) -> usize {
    let mut chosen = 0;
    let mut free_from = i64::MIN;
    for (from, to) in covers {
        if from >= free_from {
            chosen += 1;
            free_from = to + 1;
        }
    }
    chosen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_token_bucket() {
    // Bursts of 200, 200 per second. Allowed: 200 + 200/s * span (the bucket starts full
    // at the first call). Proven: what its denials say it owed (see `bucket_proven`).
    let p = Policy::new(Config::of(TokenBucket, 200).every(5)).await;
    let run = hammer(&p).await;
    let allowed = 200.0 + 200.0 * run.span_ms() / 1000.0;
    run.report(
        "token_bucket",
        bucket_proven(&run, 200.0, 200.0),
        allowed + 1.0,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_gcra() {
    // Same contract as the token bucket: bursts of 200, 200 per second (a fresh tat
    // counts from the first call, and a denial means less than one permit's room).
    let p = Policy::new(Config::of(Gcra, 200).every(5)).await;
    let run = hammer(&p).await;
    let allowed = 200.0 + 200.0 * run.span_ms() / 1000.0;
    run.report("gcra", bucket_proven(&run, 200.0, 200.0), allowed + 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_fixed_window() {
    // 40 per 200 ms window (200 per second). Allowed: 40 per aligned window touched. Call
    // by call: no grant once 40 were granted in its window, no denial before.
    const W: i64 = 200;
    let p = Policy::new(Config::of(FixedWindow, 40).every(W)).await;
    let run = hammer(&p).await;
    let mut denied_in = BTreeSet::new();
    let straddlers = replay_windows(&run, W, |k, call, sure, most| {
        if call.granted {
            assert!(
                sure[1] < 40,
                "fixed_window: granted after {} in its window",
                sure[1]
            );
        } else {
            assert!(
                most[1] >= 40,
                "fixed_window: denied after {} of 40",
                most[1]
            );
            denied_in.insert(k);
        }
    });
    run.report(
        "fixed_window",
        (40 * denied_in.len() as i64 - straddlers) as f64,
        (40 * run.windows(W)) as f64,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_sliding_log() {
    // 40 per any 200 ms. Any half-open interval of 200 ms holds at most 40 grants, and
    // floor(span / 200) + 1 of them cover the span. Call by call: no grant while 40 grants
    // lie in the 200 ms before it, no denial while fewer do. A sliding log that counted
    // denials (the seed's bug) would deny with room left.
    const W: i64 = 200;
    const W_US: i64 = W * 1000;
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

    // A grant's log entry is scored with its script's time, within its bracket.
    let (mut befores, mut afters) = (Vec::new(), Vec::new());
    let mut proofs = Vec::new();
    for call in &run.calls {
        let in_window =
            |times: &[i64], since: i64| times.len() - times.partition_point(|&t| t <= since);
        // Earlier grants surely in (now - W, now], and at most.
        let sure = in_window(&befores, call.after_us - W_US);
        let most = in_window(&afters, call.before_us - W_US);
        if call.granted {
            assert!(sure < 40, "sliding_log: granted with {sure} in the window");
            befores.push(call.before_us);
            afters.push(call.after_us);
        } else {
            assert!(
                most >= 40,
                "sliding_log: denied with {most} of 40 in the window"
            );
            proofs.push((call.before_us - W_US, call.after_us));
        }
    }
    let allowed = (40 * ((run.end_us - run.start_us) / 1000 / W + 1)) as f64;
    run.report("sliding_log", (40 * disjoint(proofs)) as f64, allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_sliding_window() {
    // 40 per 200 ms. Allowed: at most 40 in any aligned window (the guarantee the
    // approximation keeps). Call by call, the estimate prev * (1 - elapsed / W) + curr
    // from the grants Redis made and the elapsed time it read: a grant only with room for
    // it, a denial only without.
    const W: i64 = 200;
    const W_US: f64 = (W * 1000) as f64;
    let p = Policy::new(Config::of(SlidingWindow, 40).every(W)).await;
    let run = hammer(&p).await;
    let mut denied_in = Vec::new();
    let straddlers = replay_windows(&run, W, |k, call, sure, most| {
        let start_us = k * W * 1000;
        let weight = |at_us: i64| 1.0 - (at_us - start_us) as f64 / W_US;
        let fewest = sure[0] as f64 * weight(call.after_us) + sure[1] as f64;
        let most = most[0] as f64 * weight(call.before_us) + most[1] as f64;
        if call.granted {
            assert!(
                fewest + 1.0 <= 40.0 + 1e-6,
                "sliding_window: granted at an estimate of {fewest}"
            );
        } else {
            assert!(
                most + 1.0 > 40.0 - 1e-6,
                "sliding_window: denied at an estimate of {most}"
            );
            // At least 40 granted in this window and the one before.
            denied_in.push((k - 1, k));
        }
    });
    let proven = 40 * disjoint(denied_in) as i64 - 2 * straddlers;
    run.report(
        "sliding_window",
        proven as f64,
        (40 * run.windows(W)) as f64,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accuracy_concurrency() {
    // At most 8 leases at once. Each client acquires, counts itself in, lets the others
    // run, counts itself out, then releases: the client-side count lies inside the
    // Redis-side lease, so its peak can never exceed a correct limit. The first round is
    // held until all 32 clients have asked (leases of an hour: none expires meanwhile), so
    // that 8 are certainly held at once and 24 certainly denied, however the clients are
    // scheduled.
    const MAX: i64 = 8;
    let p = Policy::new(Config::of(Concurrency, MAX)).await;
    let held = Arc::new(AtomicI64::new(0));
    let peak = Arc::new(AtomicI64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let denied = Arc::new(AtomicU64::new(0));
    // The fewest permits left after a grant: 0 when Redis held all MAX at once.
    let fewest_left = Arc::new(AtomicI64::new(MAX));
    let first_round = Arc::new(tokio::sync::Barrier::new(TASKS));
    let first_round_granted = Arc::new(AtomicU64::new(0));
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
        let (first_round, first_round_granted) = (first_round.clone(), first_round_granted.clone());
        tasks.push(tokio::spawn(async move {
            let mut first = true;
            while first || Instant::now() < deadline {
                let lease = random_suffix();
                let reply = p.acquire_lease(1, "shop", &lease).await;
                let is_granted = reply[0] == GRANTED;
                if is_granted {
                    granted.fetch_add(1, Ordering::Relaxed);
                    fewest_left.fetch_min(reply[1], Ordering::Relaxed);
                    let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                } else {
                    // Denied only when every permit was held.
                    assert_eq!(reply[..2], [DENIED, 0], "denied with permits free");
                    denied.fetch_add(1, Ordering::Relaxed);
                }
                if first {
                    if is_granted {
                        first_round_granted.fetch_add(1, Ordering::SeqCst);
                    }
                    first_round.wait().await;
                    first = false;
                } else {
                    tokio::task::yield_now().await;
                }
                if is_granted {
                    held.fetch_sub(1, Ordering::SeqCst);
                    let released = p.release("shop", &lease).await;
                    assert_eq!(released[..3], [GRANTED, released[1], 1], "{released:?}");
                }
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
    assert_eq!(
        first_round_granted.load(Ordering::SeqCst),
        MAX as u64,
        "32 asking at once, none giving back: exactly 8 granted"
    );
    assert_eq!(peak, MAX, "{peak} leases held at once");
    assert_eq!(fewest_left, 0);
    assert!(denied >= (TASKS as u64) - MAX as u64);
    assert_eq!(
        p.zcard(&p.state_key("leases")).await,
        0,
        "every lease was given back"
    );
}
