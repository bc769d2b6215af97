//! policy_state.lua, the read-only report of a policy's live state for every algorithm,
//! driven straight through Redis next to the acquire scripts: what it reports for a fresh
//! policy, after grants, after a release and for state that has aged out, that it agrees
//! with what an acquire would grant, and that it never writes.
//!
//! No assertion depends on how fast the machine is: windows and leases last 8 x 10^11 ms
//! (about 25 years: the current aligned window runs from 2020-09-13 to 2046-01-19, so no
//! test crosses a window boundary) and rates are one permit per 10^9 ms, so nothing
//! refills while a test runs; aged-out state is written directly with times long past.

use std::sync::LazyLock;

use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

use crate::helpers::{random_suffix, redis_url};
use crate::lua::scripts::*;

static POLICY_STATE_SRC: &str = include_str!("../../../lua/policy_state.lua");
static POLICY_STATE: LazyLock<Script> = LazyLock::new(|| Script::new(POLICY_STATE_SRC));
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
        let key = format!("rktest-state-{}:{{p}}", random_suffix());
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

    /// The state keys sync_policy.lua is given: :fw, :log, :sw, :leases.
    fn state_keys(&self) -> Vec<String> {
        ["fw", "log", "sw", "leases"]
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
                    .arg(POLICY_STATE_SRC)
                    .arg(4)
                    .arg(&self.key)
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
        inv.arg(permits).arg("shop");
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

#[tokio::test]
async fn lua_state_fresh_policy_of_every_algorithm_is_full() {
    for algo in Algo::ALL {
        let p = Policy::new(algo, 5).await;
        let state = p.state_without_writes("fresh").await;
        assert_eq!(
            state,
            Some(State {
                current: "5".into(),
                max: 5,
                rate: algo.reported_rate().into(),
                version: 1,
                updated_ms: 0,
                full_in_ms: 0,
                index: algo.index(),
            }),
            "{algo:?}"
        );
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_reports_max_minus_the_permits_taken() {
    for algo in Algo::ALL {
        let p = Policy::new(algo, 10).await;
        let before = p.redis_ms().await;
        assert_eq!(p.acquire(1).await[0], GRANTED, "{algo:?}");
        assert_eq!(p.acquire(2).await[0], GRANTED, "{algo:?}");
        let after = p.redis_ms().await;
        let s = p.state_without_writes("after 3 taken").await.unwrap();
        assert_eq!(
            (s.max, s.rate.as_str(), s.version, s.index),
            (10, algo.reported_rate(), 1, algo.index()),
            "{algo:?} {s:?}"
        );

        // Nothing comes back during the test: 7 permits, give or take a refill of
        // (test duration) / 10^9 ms at RATE.
        let current = s.current();
        match algo {
            TokenBucket => assert!((7.0..7.001).contains(&current), "{algo:?} {s:?}"),
            _ => assert_eq!(s.current, "7", "{algo:?} {s:?}"),
        }

        // Back to full: 3 permits at RATE; the window / lease.
        let full_in = s.full_in_ms;
        let ok = match algo {
            TokenBucket | Gcra => (2 * PERMIT_MS..=3 * PERMIT_MS).contains(&full_in),
            FixedWindow | SlidingLog | Concurrency => (1..=FOREVER).contains(&full_in),
            SlidingWindow => (FOREVER + 1..=2 * FOREVER).contains(&full_in),
        };
        assert!(ok, "{algo:?} full_in_ms {full_in}");

        // The last write: the grant's time where it is stored, the window's start where
        // only that is, nothing for gcra.
        let updated = s.updated_ms;
        match algo {
            TokenBucket | SlidingLog => assert!(
                (before.floor() as i64..=after.floor() as i64).contains(&updated),
                "{algo:?} updated_ms {updated} not in [{before}, {after}]"
            ),
            // The lease's expiry less its TTL: a double near 2.6 x 10^12 keeps ~0.5 µs, so
            // the acquire's time can come back a hair early, across a ms boundary.
            Concurrency => assert!(
                (before.floor() as i64 - 1..=after.floor() as i64).contains(&updated),
                "{algo:?} updated_ms {updated} not in [{before}, {after}]"
            ),
            FixedWindow | SlidingWindow => {
                assert_eq!(updated, window_start(before, FOREVER), "{algo:?}")
            }
            Gcra => assert_eq!(updated, 0, "{algo:?}"),
        }
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_agrees_with_what_an_acquire_grants() {
    for algo in Algo::ALL {
        let p = Policy::new(algo, 10).await;
        assert_eq!(p.acquire(4).await[0], GRANTED, "{algo:?}");
        let s = p.state_of_configured().await;
        let can_take = s.current().floor() as i64;
        assert_eq!(can_take, 6, "{algo:?} {s:?}");

        // One more than the state says is denied (and changes nothing), exactly as many is
        // granted.
        let denied = p.acquire(can_take + 1).await;
        assert_eq!(denied[0], DENIED, "{algo:?} {denied:?}");
        let again = p.state_of_configured().await;
        assert_eq!(
            again.current().floor() as i64,
            can_take,
            "{algo:?} {again:?}"
        );
        let granted = p.acquire(can_take).await;
        assert_eq!(granted[..2], [GRANTED, 0], "{algo:?} {granted:?}");

        let s = p.state_without_writes("used up").await.unwrap();
        assert!(s.current() < 0.001, "{algo:?} {s:?}");
        assert!(s.full_in_ms > 0, "{algo:?} {s:?}");
        // The acquire script's own reset_after_ms, read a moment earlier, is no sooner.
        assert!(s.full_in_ms <= granted[3], "{algo:?} {s:?} {granted:?}");
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_missing_policy_is_an_empty_reply() {
    for algo in Algo::ALL {
        let p = Policy::unconfigured(algo, FOREVER).await;
        assert_eq!(p.state_without_writes("missing").await, None, "{algo:?}");
        assert!(p.state_by_sha().await.is_empty(), "{algo:?}");

        // State left behind without a configuration is no policy either.
        p.hset(&p.key, "tat", "1".into()).await;
        p.hset(&p.key, "algorithm", algo.name().into()).await;
        assert_eq!(p.state_without_writes("no max_permits").await, None);

        // Nor is a policy lacking what its algorithm needs (the acquire scripts answer
        // "no such policy" to it too).
        p.hset(&p.key, "max_permits", "5".into()).await;
        assert_eq!(
            p.state_without_writes("no rate / window / ttl").await,
            None,
            "{algo:?}"
        );
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_concurrency_release_gives_the_permit_back() {
    let p = Policy::new(Concurrency, 5).await;
    assert_eq!(p.acquire_as(2, "lease-a").await[0], GRANTED);
    assert_eq!(p.acquire_as(1, "lease-b").await[0], GRANTED);
    let s = p.state_of_configured().await;
    assert_eq!((s.current.as_str(), s.index), ("2", 5), "{s:?}");
    assert!(s.full_in_ms > 0, "{s:?}");

    assert_eq!(p.release("lease-a").await[..3], [GRANTED, 4, 2]);
    let s = p.state_without_writes("lease-a released").await.unwrap();
    assert_eq!(s.current, "4", "{s:?}");
    assert!(
        (1..=FOREVER).contains(&s.full_in_ms),
        "lease-b still held: {s:?}"
    );

    assert_eq!(p.release("lease-b").await[..3], [GRANTED, 5, 1]);
    let s = p.state_without_writes("all released").await.unwrap();
    assert_eq!(
        (s.current.as_str(), s.full_in_ms, s.updated_ms),
        ("5", 0, 0),
        "{s:?}"
    );
    p.delete().await;
}

#[tokio::test]
async fn lua_state_reports_fractions_and_the_gcra_burst() {
    // A token bucket holding 2.5 tokens as of now: 2.5 (and a hair), 7.5 permits to refill.
    let p = Policy::new(TokenBucket, 10).await;
    let now = p.redis_ms().await;
    p.hset(&p.key, "curr_permits", "2.5".into()).await;
    p.hset(&p.key, "last_mill_second", format!("{now}")).await;
    let s = p.state_without_writes("2.5 tokens").await.unwrap();
    assert!((2.5..2.501).contains(&s.current()), "{s:?}");
    assert!(
        (7 * PERMIT_MS..=7 * PERMIT_MS + PERMIT_MS / 2).contains(&s.full_in_ms),
        "{s:?}"
    );
    assert_eq!(s.updated_ms, now.floor() as i64, "{s:?}");
    p.delete().await;

    // GCRA with tat 2.5 emission intervals ahead: a burst of floor(10 - 2.5) = 7 is left.
    let p = Policy::new(Gcra, 10).await;
    let now = p.redis_ms().await;
    let tat = now + 2.5 * PERMIT_MS as f64;
    p.hset(&p.key, "tat", format!("{tat}")).await;
    let s = p.state_without_writes("tat ahead").await.unwrap();
    assert_eq!(s.current, "7", "{s:?}");
    assert!(
        (2 * PERMIT_MS..=5 * PERMIT_MS / 2).contains(&s.full_in_ms),
        "{s:?}"
    );
    assert_eq!(p.acquire(8).await[0], DENIED);
    assert_eq!(p.acquire(7).await[..2], [GRANTED, 0]);
    p.delete().await;

    // Sliding window: 4 granted in the previous window, now part way through this one.
    let p = Policy::new(SlidingWindow, 10).await;
    let now = p.redis_ms().await;
    let start = window_start(now, FOREVER);
    p.hset(&p.key, "sw_start", (start - FOREVER).to_string())
        .await;
    p.hset(&p.key, "sw_curr", "4".into()).await;
    let s = p
        .state_without_writes("previous window used")
        .await
        .unwrap();
    let weight = 1.0 - (now - start as f64) / FOREVER as f64;
    let expected = 10.0 - 4.0 * weight;
    assert!(
        (s.current() - expected).abs() < 0.001,
        "{s:?}, expected about {expected}"
    );
    assert_ne!(s.current().fract(), 0.0, "{s:?}");
    assert!((1..=FOREVER).contains(&s.full_in_ms), "{s:?}");
    assert_eq!(s.updated_ms, start - FOREVER, "{s:?}");
    p.delete().await;
}

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

#[tokio::test]
async fn lua_state_unknown_algorithm_is_index_zero() {
    let p = Policy::new(TokenBucket, 5).await;
    p.hset(&p.key, "algorithm", "leaky_bucket".into()).await;
    let s = p.state_without_writes("unknown algorithm").await.unwrap();
    assert_eq!(
        s,
        State {
            current: "5".into(),
            max: 5,
            rate: RATE.into(),
            version: 1,
            updated_ms: 0,
            full_in_ms: 0,
            index: 0,
        }
    );
    p.delete().await;
}
