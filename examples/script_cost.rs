//! What Redis spends inside the acquire scripts, per call and per acquire, by the shape of
//! a batch: read from Redis' own `INFO commandstats` (the time of each FCALL, and of the
//! commands the scripts ran inside it), not from a client's clock, so the HTTP server and
//! the network are out of the figures. the benchmark (bench/) runs it against its private Redis
//! once the server is stopped:
//!
//!     cargo run --release --example script_cost -- redis://127.0.0.1:6380
//!
//! It resets the Redis' statistics (`CONFIG RESETSTAT`) before each measurement: point it
//! at a Redis of its own. Its keys live under `rcost:` and are deleted at the end.
//!
//! The shapes, each at several batch sizes, are those the benchmark drives over HTTP:
//! one hot global policy (a batch is one entry standing for all its acquires), distinct
//! global policies (10,000, walked in turn), and distinct callers' buckets of a keyed
//! token-bucket policy (100,000 keys, walked in turn); and, for comparison, a lone acquire
//! as the server sends it (its algorithm's own script). Each figure is the lowest of
//! [`ROUNDS`] rounds. Every reply is checked: an acquire that is not granted (the batch
//! protocol of `lua/acquire_batch.lua` changed under this example) stops it. The calls and
//! the policies are made by the limiter crate itself ([`AcquireCall`], `push_policy`), as
//! the server makes them: the protocol is written once.

#![forbid(unsafe_code)]

#[path = "shared/never_reached_config.rs"]
mod never_reached_config;
use never_reached_config::never_reached;

use std::collections::HashMap;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use ratekeeper_limiter::decide::reply::{Code, REPLY_LEN};
use ratekeeper_limiter::domain::{Algorithm, AppSlug, PolicyName, Scope};
use ratekeeper_limiter::functions;
use ratekeeper_limiter::scripts::batch_reply_integers;
use ratekeeper_limiter::{AcquireCall, BucketLimits, KeyedBucket, Limiter, PolicyConfig};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, RedisResult};

const PREFIX: &str = "rcost";
const APP: &str = "bench";
const POLICIES: usize = 10_000;
const KEYS: usize = 100_000;
const ROUNDS: usize = 5;
/// Acquires per round, whatever the batch size.
const ACQUIRES_PER_ROUND: usize = 20_000;
const BATCH_SIZES: [usize; 3] = [4, 16, 64];

/// One batch shape.
#[derive(Clone, Copy)]
enum Shape {
    /// A lone acquire of the hot policy, with the token bucket's own script.
    AloneGlobal,
    /// A lone acquire of a caller's bucket, with the keyed token bucket's own script.
    AloneKeyed,
    /// Every acquire of the batch on the hot policy: one entry with a count.
    OneBucket,
    /// Each acquire on another global policy.
    DistinctPolicies,
    /// Each acquire on another caller's bucket of a keyed policy.
    DistinctKeys,
}

impl Shape {
    fn label(self) -> &'static str {
        match self {
            Self::AloneGlobal => "alone: global token bucket",
            Self::AloneKeyed => "alone: keyed token bucket",
            Self::OneBucket => "batch: one hot bucket",
            Self::DistinctPolicies => "batch: distinct policies",
            Self::DistinctKeys => "batch: distinct keyed buckets",
        }
    }
}

/// The policies and the app every call of the run is made of, as the server has them.
struct Fixture {
    limiter: Limiter,
    app: AppSlug,
    hot: PolicyName,
    policies: Vec<PolicyName>,
    /// The keyed token bucket: never denied, refilling slowly, so that each bucket stays
    /// in Redis for the whole run.
    keyed: PolicyConfig,
    callers: Vec<String>,
}

impl Fixture {
    fn new(url: &str) -> anyhow::Result<Self> {
        let name = |n: String| PolicyName::parse(&n).map_err(|e| anyhow::anyhow!("{n}: {e:?}"));
        let keyed = PolicyConfig {
            scope: Scope::PerKey,
            rate: 0.01,
            ..never_reached(name("users".to_owned())?, APP)
        };
        Ok(Self {
            limiter: Limiter::new(url, PREFIX, Duration::from_secs(60))?,
            app: AppSlug::parse(APP).map_err(|e| anyhow::anyhow!("{e:?}"))?,
            hot: name("hot".to_owned())?,
            policies: (0..POLICIES)
                .map(|i| name(format!("p{i}")))
                .collect::<anyhow::Result<_>>()?,
            keyed,
            callers: (0..KEYS).map(|i| format!("u{i}")).collect(),
        })
    }

    fn global(&self, name: &PolicyName) -> AcquireCall {
        AcquireCall::global(
            &self.limiter,
            name,
            Algorithm::TokenBucket,
            1,
            &self.app,
            Some(&never_reached(name.clone(), APP)),
        )
    }

    /// An acquire of the `i`th caller's bucket (round the callers).
    fn keyed(&self, i: usize) -> AcquireCall {
        let bucket = KeyedBucket {
            policy: &self.keyed,
            caller: &self.callers[i % KEYS],
            limits: BucketLimits::of(&self.keyed),
        };
        AcquireCall::keyed(&self.limiter, &bucket, 1, &self.app)
    }

    /// The script call for `size` acquires of `shape`, the `first`th acquire of the run
    /// being the first of them (distinct shapes walk their policies or keys from there).
    fn call(&self, shape: Shape, size: usize, first: usize) -> Cmd {
        match shape {
            Shape::AloneGlobal => self.global(&self.hot).alone_cmd(),
            Shape::AloneKeyed => self.keyed(first).alone_cmd(),
            Shape::OneBucket => AcquireCall::batch_cmd([(&self.global(&self.hot), size)]),
            Shape::DistinctPolicies => {
                let calls: Vec<_> = (first..first + size)
                    .map(|i| self.global(&self.policies[i % POLICIES]))
                    .collect();
                AcquireCall::batch_cmd(calls.iter().map(|call| (call, 1)))
            }
            Shape::DistinctKeys => {
                let calls: Vec<_> = (first..first + size).map(|i| self.keyed(i)).collect();
                AcquireCall::batch_cmd(calls.iter().map(|call| (call, 1)))
            }
        }
    }

    /// Writes the global policies through the sync's own script, as the server does.
    async fn write_policies(&self) -> anyhow::Result<()> {
        let configs = std::iter::once(&self.hot)
            .chain(&self.policies)
            .map(|name| never_reached(name.clone(), APP));
        let mut pushes = stream::iter(configs)
            .map(|config| async move { self.limiter.push_policy(&config).await })
            .buffer_unordered(32);
        while let Some(pushed) = pushes.next().await {
            pushed?;
        }
        Ok(())
    }
}

/// A script's reply as integers: a single script answers an array of them, the batch
/// script one string of 8-byte little-endian integers.
fn integers(reply: &redis::Value) -> anyhow::Result<Vec<i64>> {
    match reply {
        redis::Value::BulkString(packed) => batch_reply_integers(packed)
            .ok_or_else(|| anyhow::anyhow!("a batch reply of {} bytes", packed.len())),
        other => Ok(redis::from_redis_value_ref(other)?),
    }
}

/// `cmdstat_<name>` -> (calls, usec) of `INFO commandstats`.
fn command_stats(info: &str) -> HashMap<String, (f64, f64)> {
    let mut stats = HashMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line.trim().split_once(':') else {
            continue;
        };
        let Some(name) = name.strip_prefix("cmdstat_") else {
            continue;
        };
        let field = |wanted: &str| {
            fields.split(',').find_map(|f| {
                let (k, v) = f.split_once('=')?;
                (k == wanted).then(|| v.parse::<f64>().ok()).flatten()
            })
        };
        if let (Some(calls), Some(usec)) = (field("calls"), field("usec")) {
            stats.insert(name.to_owned(), (calls, usec));
        }
    }
    stats
}

/// One round: µs per script call, and µs per acquire inside the commands the scripts ran.
async fn round(
    conn: &mut MultiplexedConnection,
    fixture: &Fixture,
    shape: Shape,
    size: usize,
    first: &mut usize,
) -> anyhow::Result<(f64, f64)> {
    let calls = ACQUIRES_PER_ROUND / size;
    let mut pipe = redis::pipe();
    for _ in 0..calls {
        pipe.add_command(fixture.call(shape, size, *first));
        *first += size;
    }
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(conn)
        .await?;
    let replies: Vec<redis::Value> = pipe.query_async(conn).await?;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    for reply in &replies {
        let reply = integers(reply)?;
        let granted = reply.len() == REPLY_LEN * size
            && reply
                .chunks(REPLY_LEN)
                .all(|r| r[0] == Code::Granted.number());
        anyhow::ensure!(granted, "{}: a reply not granted: {reply:?}", shape.label());
    }
    let stats = command_stats(&info);
    let (fcall_calls, fcall_usec) = stats.get("fcall").copied().unwrap_or_default();
    anyhow::ensure!(
        fcall_calls as usize == calls,
        "{fcall_calls} FCALL counted for {calls} sent: is another client using this Redis?"
    );
    let inside: f64 = stats
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "fcall" | "config|resetstat"))
        .map(|(_, (_, usec))| usec)
        .sum();
    Ok((fcall_usec / calls as f64, inside / (calls * size) as f64))
}

/// Deletes every key of this example.
async fn clean_up(conn: &mut MultiplexedConnection) -> RedisResult<()> {
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{PREFIX}:*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        if !keys.is_empty() {
            redis::cmd("UNLINK")
                .arg(&keys)
                .query_async::<()>(conn)
                .await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let client = redis::Client::open(url.as_str())?;
    // A round is one pipeline of 20,000 acquires: on a slow machine their replies take
    // longer than the client's default response timeout (500 ms), which would fail the
    // round; the timeout here only guards against a Redis that hangs.
    let config = AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(60)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    functions::LIBRARY
        .load_cmd()
        .query_async::<()>(&mut conn)
        .await?;
    let fixture = Fixture::new(&url)?;
    fixture.write_policies().await?;
    let mut runs = vec![(Shape::AloneGlobal, 1), (Shape::AloneKeyed, 1)];
    for shape in [
        Shape::OneBucket,
        Shape::DistinctPolicies,
        Shape::DistinctKeys,
    ] {
        runs.extend(BATCH_SIZES.map(|size| (shape, size)));
    }
    println!(
        "{:<30} {:>8} {:>9} {:>11} {:>12}",
        "script call", "acquires", "µs/call", "µs/acquire", "in commands"
    );
    // Every keyed bucket made once before the figures: they are of buckets that exist, as
    // in a steady state (the walks go on where the last round stopped, round the keys).
    let mut first = 0;
    for _ in 0..KEYS.div_ceil(ACQUIRES_PER_ROUND) {
        round(&mut conn, &fixture, Shape::DistinctKeys, 64, &mut first).await?;
    }
    let mut measured = Ok(());
    for (shape, size) in runs {
        let mut best: Option<(f64, f64)> = None;
        for _ in 0..ROUNDS {
            match round(&mut conn, &fixture, shape, size, &mut first).await {
                Ok(r) => {
                    if best.is_none_or(|b| r.0 < b.0) {
                        best = Some(r);
                    }
                }
                Err(e) => {
                    measured = Err(e);
                    break;
                }
            }
        }
        let Some((per_call, inside)) = best else {
            break;
        };
        println!(
            "{:<30} {:>8} {:>9.1} {:>11.2} {:>12.2}",
            shape.label(),
            size,
            per_call,
            per_call / size as f64,
            inside
        );
    }
    clean_up(&mut conn).await?;
    measured
}
