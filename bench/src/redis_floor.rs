//! Scenario l: the cheapest decision Redis can take, and an inexact one: what Envoy's
//! ratelimit pays per descriptor, an `INCR` of a window's counter and its `PEXPIRE`, sent
//! in pipelines. redis-benchmark runs each command with 16 in a pipeline
//! (`-P 16`) over the run's connections, on random counters of 100,000 (a counter per
//! caller and window), straight against the private Redis; Redis' CPU time over both
//! runs, per pair, is the floor the budget holds a decision to (within 2x). It is measured
//! once per round and the median taken, as the rounds' figures are: one run alone moved
//! by nearly 2x between the runs of one session on a shared machine.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::cpu;
use crate::figures::median;
use crate::knobs::Knobs;
use crate::private_redis::PrivateRedis;
use crate::procs;

/// Commands in one pipeline, as a busy gateway's ratelimit sends them.
const PIPELINE: &str = "16";
/// Counters the pairs fall on (`__rand_int__` below this).
const COUNTERS: &str = "100000";

/// What it measured: Redis' CPU µs per pair, pairs a second (the medians of the runs), and
/// redis-benchmark's CSV of every run.
pub struct RedisFloor {
    pub us_per_pair: Option<f64>,
    pub pairs_per_s: Option<f64>,
    pub csv: String,
}

/// One run per round, the medians of their figures; none when a run failed.
pub async fn run(knobs: &Knobs, redis: &PrivateRedis, hz: f64) -> Result<RedisFloor> {
    let (mut us, mut rates, mut csv) = (Vec::new(), Vec::new(), String::new());
    let runs = knobs.rounds.max(1);
    for _ in 0..runs {
        let one = run_once(knobs, redis, hz).await?;
        us.push(one.us_per_pair);
        rates.push(one.pairs_per_s);
        csv.push_str(&one.csv);
    }
    let all = |v: Vec<Option<f64>>| v.into_iter().collect::<Option<Vec<f64>>>();
    Ok(RedisFloor {
        us_per_pair: all(us).and_then(|v| median(v.into_iter())),
        pairs_per_s: all(rates).and_then(|v| median(v.into_iter())),
        csv,
    })
}

async fn run_once(knobs: &Knobs, redis: &PrivateRedis, hz: f64) -> Result<RedisFloor> {
    crate::log!(
        "redis-benchmark: INCR + PEXPIRE, pipelines of {PIPELINE}, {} connections, {} pairs",
        knobs.connections,
        knobs.redis_requests
    );
    let pid = redis.service.pid();
    let (mut ticks, mut seconds, mut csv, mut complete) = (0u64, 0.0, String::new(), true);
    for words in [
        &["INCR", "rfloor:__rand_int__"][..],
        &["PEXPIRE", "rfloor:__rand_int__", "60000"][..],
    ] {
        let mut command = procs::command("redis-benchmark", ["-h", "127.0.0.1", "-p"]);
        command
            .arg(redis.port.to_string())
            .args(["-c", &knobs.connections.to_string()])
            .args(["-n", &knobs.redis_requests.to_string()])
            .args(["-P", PIPELINE, "-r", COUNTERS, "--csv"])
            .args(words);
        let before = cpu::process_ticks(pid);
        let started = Instant::now();
        let out = procs::run(command, Duration::from_secs(600)).await?;
        seconds += started.elapsed().as_secs_f64();
        match (before, cpu::process_ticks(pid)) {
            (Some(before), Some(after)) if out.success && after >= before => {
                ticks += after - before;
            }
            _ => {
                complete = false;
                crate::log!(
                    "WARNING: redis-benchmark {} failed: {}",
                    words[0],
                    out.tail()
                );
            }
        }
        csv.push_str(&out.stdout);
    }
    let pairs = knobs.redis_requests as f64;
    Ok(RedisFloor {
        us_per_pair: (complete && pairs > 0.0).then(|| ticks as f64 * 1e6 / hz / pairs),
        pairs_per_s: (complete && seconds > 0.0).then(|| pairs / seconds),
        csv,
    })
}
