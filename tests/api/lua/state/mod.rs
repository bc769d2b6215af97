//! policy_state.lua, the read-only report of a policy's live state for every algorithm,
//! driven straight through Redis next to the acquire scripts: what it reports for a fresh
//! policy, after grants, after a release and for state that has aged out, that it agrees
//! with what an acquire would grant, and that it never writes.
//!
//! No assertion depends on how fast the machine is: windows and leases last 8 x 10^11 ms
//! (about 25 years: the current aligned window runs from 2020-09-13 to 2046-01-19, so no
//! test crosses a window boundary) and rates are one permit per 10^9 ms, so nothing
//! refills while a test runs; aged-out state is written directly with times long past.
//!
//! One file per area: `permits` (fresh, after grants, after a release, in agreement with
//! an acquire), `fractions` (partly refilled buckets, the GCRA burst, a weighted sliding
//! window), `aged_out` and `missing_and_unknown`. The policy fixture below is shared by
//! them.

use std::sync::LazyLock;

use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

use crate::helpers::{random_suffix, redis_url, test_prefix};
use crate::lua::scripts::*;

mod aged_out;
mod fractions;
mod missing_and_unknown;
mod permits;

/// policy_state.lua as the server loads it (with the algorithm numbers ahead of it).
static POLICY_STATE_SRC: LazyLock<&str> =
    LazyLock::new(|| ratekeeper_limiter::scripts::POLICY_STATE.source());
static POLICY_STATE: LazyLock<Script> = LazyLock::new(|| Script::new(&POLICY_STATE_SRC));
const GRANTED: i64 = 1;
const DENIED: i64 = -1;

/// Windows and lease TTLs no test outlives or crosses: 8 x 10^11 ms, about 25 years, the
/// current window aligned on it running from 2020-09-13 to 2046-01-19.
const FOREVER: i64 = 800_000_000_000;
/// Permits per second of token_bucket and gcra: one per 10^9 ms (11.6 days).
const RATE: &str = "0.000001";
/// The time one permit takes to come back at RATE, in ms.
const PERMIT_MS: i64 = 1_000_000_000;

impl Algo {
    /// The rate the state reports: the stored one where the algorithm has a rate.
    fn reported_rate(self) -> &'static str {
        match self {
            TokenBucket | Gcra => RATE,
            _ => "0",
        }
    }
}

/// policy_state.lua's reply.
#[derive(Debug, Clone, PartialEq)]
struct State {
    current: String,
    max: i64,
    rate: String,
    version: i64,
    updated_ms: i64,
    full_in_ms: i64,
    index: i64,
}

impl State {
    fn current(&self) -> f64 {
        self.current.parse().expect("current_permits is a number")
    }
}

struct Policy {
    conn: MultiplexedConnection,
    key: String,
    algo: Algo,
    /// window_ms or lease_ttl_ms, whichever the algorithm has.
    span_ms: i64,
}

impl Policy {
    /// A policy of `algo` for app `shop` under a key of its own, with windows and leases of
    /// FOREVER and RATE.
    async fn new(algo: Algo, max: i64) -> Self {
        Self::with_span(algo, max, FOREVER).await
    }

    async fn with_span(algo: Algo, max: i64, span_ms: i64) -> Self {
        let p = Self::unconfigured(algo, span_ms).await;
        let mut conn = p.conn.clone();
        let mut inv = SYNC_POLICY.prepare_invoke();
        inv.key(&p.key);
        for k in p.state_keys() {
            inv.key(k);
        }
        inv.arg(1)
            .arg(1)
            .arg(max)
            .arg(RATE)
            .arg(",shop,")
            .arg("1")
            .arg(algo.name())
            .arg(if algo.windowed() {
                span_ms.to_string()
            } else {
                String::new()
            })
            .arg(if algo == Concurrency {
                span_ms.to_string()
            } else {
                String::new()
            });
        let written: i64 = inv.invoke_async(&mut conn).await.unwrap();
        assert_eq!(written, 1, "{algo:?}: sync_policy.lua");
        p
    }

    /// A key of its own, nothing written under it.
    async fn unconfigured(algo: Algo, span_ms: i64) -> Self {
        let client = redis::Client::open(redis_url()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let key = format!("{}:{{p}}", test_prefix("state"));
        Self {
            conn,
            key,
            algo,
            span_ms,
        }
    }

    fn state_key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.key)
    }

    /// The state keys sync_policy.lua is given: :tb, :fw, :log, :sw, :leases.
    fn state_keys(&self) -> Vec<String> {
        ["tb", "fw", "log", "sw", "leases"]
            .iter()
            .map(|s| self.state_key(s))
            .collect()
    }

    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let mut conn = self.conn.clone();
        cmd.query_async(&mut conn).await.unwrap()
    }

    /// policy_state.lua, run with EVAL_RO: Redis refuses the call if the script writes.
    async fn state(&self) -> Option<State> {
        let reply: Vec<Value> = self
            .query(
                redis::cmd("EVAL_RO")
                    .arg(*POLICY_STATE_SRC)
                    .arg(5)
                    .arg(&self.key)
                    .arg(self.state_key("tb"))
                    .arg(self.state_key("fw"))
                    .arg(self.state_key("log"))
                    .arg(self.state_key("leases")),
            )
            .await;
        if reply.is_empty() {
            return None;
        }
        let (current, max, rate, version, updated_ms, full_in_ms, index) =
            redis::from_redis_value(Value::Array(reply)).expect("a reply of seven");
        Some(State {
            current,
            max,
            rate,
            version,
            updated_ms,
            full_in_ms,
            index,
        })
    }

    /// policy_state.lua as the service runs it, by SHA (EVALSHA; the no-writes flag holds).
    async fn state_by_sha(&self) -> Vec<Value> {
        let mut conn = self.conn.clone();
        POLICY_STATE
            .key(&self.key)
            .key(self.state_key("tb"))
            .key(self.state_key("fw"))
            .key(self.state_key("log"))
            .key(self.state_key("leases"))
            .invoke_async(&mut conn)
            .await
            .unwrap()
    }

    async fn state_of_configured(&self) -> State {
        self.state()
            .await
            .unwrap_or_else(|| panic!("{:?}: empty state", self.algo))
    }

    /// The acquire script of the policy's algorithm (`id`: request or lease id).
    async fn acquire_as(&self, permits: i64, id: &str) -> Vec<i64> {
        let mut conn = self.conn.clone();
        let mut inv = self.algo.script().prepare_invoke();
        inv.key(&self.key);
        if let Some(suffix) = self.algo.state_suffix() {
            inv.key(self.state_key(suffix));
        }
        inv.arg(permits).arg("shop").arg(self.algo.config_args());
        if matches!(self.algo, SlidingLog | Concurrency) {
            inv.arg(id);
        }
        inv.invoke_async(&mut conn).await.unwrap()
    }

    async fn acquire(&self, permits: i64) -> Vec<i64> {
        self.acquire_as(permits, &random_suffix()).await
    }

    async fn release(&self, lease: &str) -> Vec<i64> {
        let mut conn = self.conn.clone();
        CONCURRENCY_RELEASE
            .key(&self.key)
            .key(self.state_key("leases"))
            .arg("shop")
            .arg(lease)
            .invoke_async(&mut conn)
            .await
            .unwrap()
    }

    /// Redis' clock, in ms with the µs kept.
    async fn redis_ms(&self) -> f64 {
        let (s, us): (i64, i64) = self.query(&redis::cmd("TIME")).await;
        (s * 1_000_000 + us) as f64 / 1000.0
    }

    async fn hset(&self, key: &str, field: &str, value: String) {
        self.query::<i64>(redis::cmd("HSET").arg(key).arg(field).arg(value))
            .await;
    }

    async fn zadd(&self, key: &str, score: String, member: &str) {
        self.query::<i64>(redis::cmd("ZADD").arg(key).arg(score).arg(member))
            .await;
    }

    /// Every key of the policy, serialized (DUMP: content and encoding, None when absent).
    async fn dump(&self) -> Vec<Option<Vec<u8>>> {
        let mut keys = vec![self.key.clone()];
        keys.extend(self.state_keys());
        let mut out = Vec::new();
        for k in keys {
            out.push(self.query(redis::cmd("DUMP").arg(k)).await);
        }
        out
    }

    /// Reads the state a few times (by EVAL_RO and by EVALSHA) and checks that no key of the
    /// policy changed, appeared or disappeared; the last state read.
    async fn state_without_writes(&self, what: &str) -> Option<State> {
        let before = self.dump().await;
        let mut last = None;
        for _ in 0..3 {
            last = self.state().await;
            self.state_by_sha().await;
        }
        assert_eq!(
            self.dump().await,
            before,
            "{:?} {what}: policy_state.lua wrote",
            self.algo
        );
        last
    }

    async fn delete(&self) {
        let mut keys = vec![self.key.clone()];
        keys.extend(self.state_keys());
        self.query::<i64>(redis::cmd("DEL").arg(keys)).await;
    }
}

/// The start of the aligned window of span `window` holding `now_ms`.
fn window_start(now_ms: f64, window: i64) -> i64 {
    let now = now_ms.floor() as i64;
    now - now.rem_euclid(window)
}
