//! The other rate-limit algorithms' Lua scripts (fixed window, sliding log, sliding window,
//! concurrency leases, GCRA) driven straight through Redis, next to the token bucket: their
//! shared checks, each one's semantics, the sync script's state resets, and accuracy under
//! 32 concurrent clients, counted against the span measured on Redis' own clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{FromRedisValue, RedisResult};

use crate::helpers::{random_suffix, redis_url};
use crate::lua::scripts::*;

/// {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}; a release
/// answers {code, remaining, released, reset_after_ms, max_permits, version}.
type Reply = Vec<i64>;

const GRANTED: i64 = 1;
const DENIED: i64 = -1;
const NO_POLICY: i64 = 0;
const NOT_ALLOWED: i64 = -2;
const ABOVE_MAX: i64 = -3;
const OTHER_ALGORITHM: i64 = -4;
const REFUSED: i64 = -5;
const UNENFORCED: i64 = 2;

/// A window / lease TTL no test outlives: one hour (windows aligned to the hour on Redis
/// time, so a test of a few ms meets a window boundary about once in a million runs).
const LONG: i64 = 3_600_000;

/// The state keys a caller passes to sync_policy.lua and delete_if_stale.lua.
const STATE_SUFFIXES: [&str; 4] = ["fw", "log", "sw", "leases"];
/// The state fields the algorithms keep in the policy's hash.
const STATE_FIELDS: [&str; 6] = [
    "curr_permits",
    "last_mill_second",
    "tat",
    "sw_start",
    "sw_curr",
    "sw_prev",
];

/// What the sync task writes for one policy.
#[derive(Debug, Clone)]
struct Config {
    created: i64,
    version: i64,
    max: i64,
    rate: f64,
    apps: &'static str,
    enabled: bool,
    algo: Algo,
    window_ms: Option<i64>,
    lease_ttl_ms: Option<i64>,
}

impl Config {
    /// A policy of `algo` for app `shop`: one hour windows and leases, a slow rate, so
    /// that nothing refills while a test runs unless the test says so.
    fn of(algo: Algo, max: i64) -> Self {
        Self {
            created: 1,
            version: 1,
            max,
            rate: 0.001,
            apps: ",shop,",
            enabled: true,
            algo,
            window_ms: algo.windowed().then_some(LONG),
            lease_ttl_ms: (algo == Concurrency).then_some(LONG),
        }
    }

    /// The same policy with time running at `ms` per window / lease / permit.
    fn every(mut self, ms: i64) -> Self {
        self.rate = 1000.0 / ms as f64;
        self.window_ms = self.window_ms.map(|_| ms);
        self.lease_ttl_ms = self.lease_ttl_ms.map(|_| ms);
        self
    }
}

/// The policy's hash, the fixed window's counter, the sliding log and the leases.
type Snapshot = (
    BTreeMap<String, String>,
    BTreeMap<String, String>,
    Vec<Vec<String>>,
);

#[derive(Clone)]
struct Policy {
    conn: MultiplexedConnection,
    key: String,
    algo: Algo,
}

impl Policy {
    /// A configured policy under a key of its own.
    async fn new(config: Config) -> Self {
        let client = redis::Client::open(redis_url()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let key = format!("rktest-algo-{}:{{p}}", random_suffix());
        let p = Self {
            conn,
            key,
            algo: config.algo,
        };
        assert_eq!(p.sync(&config).await.unwrap(), 1);
        p
    }

    fn state_key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.key)
    }

    fn state_keys(&self) -> Vec<String> {
        STATE_SUFFIXES.iter().map(|s| self.state_key(s)).collect()
    }

    async fn query<T: FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let mut conn = self.conn.clone();
        cmd.query_async(&mut conn).await.unwrap()
    }

    /// sync_policy.lua with all nine arguments and every state key.
    async fn sync(&self, c: &Config) -> RedisResult<i64> {
        let mut conn = self.conn.clone();
        let mut inv = SYNC_POLICY.prepare_invoke();
        inv.key(&self.key);
        for k in self.state_keys() {
            inv.key(k);
        }
        inv.arg(c.created)
            .arg(c.version)
            .arg(c.max)
            .arg(c.rate.to_string())
            .arg(c.apps)
            .arg(if c.enabled { "1" } else { "0" })
            .arg(c.algo.name())
            .arg(c.window_ms.map(|w| w.to_string()).unwrap_or_default())
            .arg(c.lease_ttl_ms.map(|l| l.to_string()).unwrap_or_default());
        inv.invoke_async(&mut conn).await
    }

    /// sync_policy.lua as the callers before this change call it: six arguments.
    async fn sync_six(&self, c: &Config, with_state_keys: bool) -> i64 {
        let mut conn = self.conn.clone();
        let mut inv = SYNC_POLICY.prepare_invoke();
        inv.key(&self.key);
        if with_state_keys {
            for k in self.state_keys() {
                inv.key(k);
            }
        }
        inv.arg(c.created)
            .arg(c.version)
            .arg(c.max)
            .arg(c.rate.to_string())
            .arg(c.apps)
            .arg(if c.enabled { "1" } else { "0" });
        inv.invoke_async(&mut conn).await.unwrap()
    }

    /// Runs the acquire script of `algo` on this policy (`id`: request or lease id).
    async fn run(&self, algo: Algo, permits: i64, app: &str, id: &str) -> Reply {
        let mut conn = self.conn.clone();
        let mut inv = algo.script().prepare_invoke();
        inv.key(&self.key);
        if let Some(suffix) = algo.state_suffix() {
            inv.key(self.state_key(suffix));
        }
        inv.arg(permits).arg(app);
        if matches!(algo, SlidingLog | Concurrency) {
            inv.arg(id);
        }
        inv.invoke_async(&mut conn).await.unwrap()
    }

    async fn acquire(&self, permits: i64, app: &str) -> Reply {
        self.run(self.algo, permits, app, &random_suffix()).await
    }

    async fn acquire_lease(&self, permits: i64, app: &str, lease: &str) -> Reply {
        self.run(Concurrency, permits, app, lease).await
    }

    async fn release(&self, app: &str, lease: &str) -> Reply {
        let mut conn = self.conn.clone();
        CONCURRENCY_RELEASE
            .key(&self.key)
            .key(self.state_key("leases"))
            .arg(app)
            .arg(lease)
            .invoke_async(&mut conn)
            .await
            .unwrap()
    }

    /// Redis' clock, in µs.
    async fn redis_us(&self) -> i64 {
        let (s, us): (i64, i64) = self.query(&redis::cmd("TIME")).await;
        s * 1_000_000 + us
    }

    async fn field(&self, name: &str) -> Option<String> {
        self.query(redis::cmd("HGET").arg(&self.key).arg(name))
            .await
    }

    async fn set_field(&self, name: &str, value: String) {
        self.query::<i64>(redis::cmd("HSET").arg(&self.key).arg(name).arg(value))
            .await;
    }

    async fn exists(&self, key: &str) -> i64 {
        self.query(redis::cmd("EXISTS").arg(key)).await
    }

    async fn pttl(&self, key: &str) -> i64 {
        self.query(redis::cmd("PTTL").arg(key)).await
    }

    async fn zcard(&self, key: &str) -> i64 {
        self.query(redis::cmd("ZCARD").arg(key)).await
    }

    async fn zrange(&self, key: &str) -> Vec<String> {
        self.query(
            redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES"),
        )
        .await
    }

    /// Everything an acquire could write: the hash (config and state fields) and the
    /// contents of every state key (not their TTLs, which count down by themselves).
    async fn snapshot(&self) -> Snapshot {
        let hash = self.query(redis::cmd("HGETALL").arg(&self.key)).await;
        let fw = self
            .query(redis::cmd("HGETALL").arg(self.state_key("fw")))
            .await;
        let log = self.zrange(&self.state_key("log")).await;
        let leases = self.zrange(&self.state_key("leases")).await;
        (hash, fw, vec![log, leases])
    }

    /// Asks until denied (at most `limit` times); the number granted.
    async fn use_up(&self, limit: usize) -> usize {
        for granted in 0..limit {
            let reply = self.acquire(1, "shop").await;
            if reply[0] == DENIED {
                return granted;
            }
            assert_eq!(reply[0], GRANTED, "{:?}: {reply:?}", self.algo);
        }
        panic!("{:?}: still granting after {limit} calls", self.algo);
    }
}

// ---------------------------------------------------------------------------------------
// What every acquire script shares.

#[tokio::test]
async fn every_script_grants_max_permits_then_denies_without_consuming() {
    for algo in Algo::ALL {
        let p = Policy::new(Config::of(algo, 5)).await;
        let first = p.acquire(1, "shop").await;
        assert_eq!(first[..3], [GRANTED, 4, 0], "{algo:?} first call {first:?}");
        assert_eq!(first[4..], [5, 1], "{algo:?} max_permits and version");
        // Time until nothing is used any more: a permit at 0.001/s, or the window / lease.
        let reset = first[3];
        let ok = match algo {
            TokenBucket | Gcra => (1_000_000..=1_000_001).contains(&reset),
            FixedWindow => (1..=LONG).contains(&reset),
            SlidingLog => reset == LONG,
            SlidingWindow => (LONG..=2 * LONG).contains(&reset),
            Concurrency => (LONG..=LONG + 1).contains(&reset),
        };
        assert!(ok, "{algo:?} reset_after_ms {reset}");
        for remaining in (0..4).rev() {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..2], [GRANTED, remaining], "{algo:?} {reply:?}");
        }
        let before = p.snapshot().await;
        for _ in 0..10 {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..2], [DENIED, 0], "{algo:?} {reply:?}");
            let retry = reply[2];
            let ok = match algo {
                TokenBucket | Gcra => (1..=1_000_001).contains(&retry),
                FixedWindow | SlidingLog => (1..=LONG).contains(&retry),
                SlidingWindow => (1..=2 * LONG).contains(&retry),
                Concurrency => (1..=LONG + 1).contains(&retry),
            };
            assert!(ok, "{algo:?} retry_after_ms {retry}");
            assert!(reply[3] >= retry, "{algo:?} reset before retry: {reply:?}");
        }
        assert_eq!(
            p.snapshot().await,
            before,
            "{algo:?}: a denial wrote nothing"
        );
    }
}

#[tokio::test]
async fn every_script_answers_no_policy_for_a_missing_key() {
    let p = Policy::new(Config::of(TokenBucket, 5)).await;
    let missing = Policy {
        key: format!("{}-missing", p.key),
        ..p.clone()
    };
    for algo in Algo::ALL {
        let reply = missing.run(algo, 1, "shop", "id").await;
        assert_eq!(reply, vec![NO_POLICY, 0, 0, 0, 0, 0], "{algo:?}");
    }
}

#[tokio::test]
async fn every_script_checks_membership_exactly_not_as_a_pattern() {
    for algo in Algo::ALL {
        let mut c = Config::of(algo, 100);
        c.apps = ",myapp,my-app,";
        let p = Policy::new(c).await;
        for app in ["app", "my", "a[", "my.app", "my%-app", ""] {
            let reply = p.acquire(1, app).await;
            assert_eq!(
                reply,
                vec![NOT_ALLOWED, 0, 0, 0, 100, 1],
                "{algo:?} app {app:?}"
            );
        }
        assert_eq!(p.acquire(1, "my-app").await[0], GRANTED, "{algo:?}");
        assert_eq!(p.acquire(1, "myapp").await[0], GRANTED, "{algo:?}");
    }
}

#[tokio::test]
async fn every_script_refuses_permits_outside_one_to_max() {
    for algo in Algo::ALL {
        let p = Policy::new(Config::of(algo, 3)).await;
        for permits in [4, 0, -2, 1000] {
            let reply = p.acquire(permits, "shop").await;
            assert_eq!(reply, vec![ABOVE_MAX, 0, 0, 0, 3, 1], "{algo:?} {permits}");
        }
        assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0], "{algo:?}");
    }
}

#[tokio::test]
async fn a_script_of_another_algorithm_answers_minus_4_with_the_index() {
    for policy_algo in Algo::ALL {
        let p = Policy::new(Config::of(policy_algo, 5)).await;
        for script in Algo::ALL {
            let reply = p.run(script, 1, "shop", &random_suffix()).await;
            if script == policy_algo {
                assert_eq!(reply[0], GRANTED, "{script:?} on its own policy");
            } else {
                assert_eq!(
                    reply,
                    vec![OTHER_ALGORITHM, policy_algo.index(), 0, 0, 0, 1],
                    "{script:?} on a {policy_algo:?} policy"
                );
            }
        }
    }
    // A hash written by the six-argument sync (no `algorithm` field) is a token bucket.
    let mut c = Config::of(TokenBucket, 5);
    let p = Policy::new(c.clone()).await;
    c.version = 2;
    assert_eq!(p.sync_six(&c, false).await, 1);
    assert_eq!(p.field("algorithm").await, None);
    for script in [FixedWindow, SlidingLog, SlidingWindow, Concurrency, Gcra] {
        let reply = p.run(script, 1, "shop", "id").await;
        assert_eq!(reply, vec![OTHER_ALGORITHM, 1, 0, 0, 0, 2], "{script:?}");
    }
}

#[tokio::test]
async fn a_disabled_policy_grants_unenforced_and_leaves_state_alone() {
    for algo in Algo::ALL {
        let mut c = Config::of(algo, 2);
        let p = Policy::new(c.clone()).await;
        assert_eq!(p.acquire(2, "shop").await[0], GRANTED, "{algo:?}");
        c.version = 2;
        c.enabled = false;
        assert_eq!(p.sync(&c).await.unwrap(), 1);
        let before = p.snapshot().await;
        for _ in 0..5 {
            let reply = p.acquire(1, "shop").await;
            assert_eq!(reply[..3], [UNENFORCED, 0, 0], "{algo:?} {reply:?}");
            assert_eq!(reply[4..], [2, 2], "{algo:?} {reply:?}");
        }
        assert_eq!(p.snapshot().await, before, "{algo:?}: state untouched");
        assert_eq!(p.acquire(1, "other").await[0], NOT_ALLOWED, "{algo:?}");
        c.version = 3;
        c.enabled = true;
        assert_eq!(p.sync(&c).await.unwrap(), 1);
        assert_eq!(
            p.acquire(1, "shop").await[0],
            DENIED,
            "{algo:?}: enforced again, still used up"
        );
    }
}

/// A denial's retry_after_ms, checked on Redis' clock in both directions: no call made
/// after the promised time is denied, and the grant never comes before it.
#[tokio::test]
async fn retry_after_is_the_time_a_denied_request_waits() {
    for algo in Algo::ALL {
        // 2 permits per 200 ms window / lease, or 10 per second (gcra, token bucket).
        let ms = if algo.windowed() || algo == Concurrency {
            200
        } else {
            100
        };
        let p = Policy::new(Config::of(algo, 2).every(ms)).await;
        p.use_up(100).await;
        let denied_from = p.redis_us().await;
        let reply = p.acquire(1, "shop").await;
        let denied_by = p.redis_us().await;
        if reply[0] == GRANTED {
            continue; // time moved on between use_up and this call: nothing to measure
        }
        assert_eq!(reply[0], DENIED, "{algo:?}");
        let retry_us = reply[2] * 1000;
        assert!(retry_us > 0, "{algo:?} {reply:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let asked_at = p.redis_us().await;
            let reply = p.acquire(1, "shop").await;
            if reply[0] == GRANTED {
                break;
            }
            assert_eq!(reply[0], DENIED, "{algo:?}");
            // The denial's own time is at most `denied_by`, this call's at least
            // `asked_at`; 1 ms for the rounding of retry_after_ms.
            assert!(
                asked_at < denied_by + retry_us + 1000,
                "{algo:?}: denied {} µs after the promised time",
                asked_at - denied_by - retry_us
            );
            assert!(Instant::now() < deadline, "{algo:?}: never granted");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let granted_by = p.redis_us().await;
        assert!(
            granted_by + 1000 >= denied_from + retry_us,
            "{algo:?}: granted {} µs before the promised time",
            denied_from + retry_us - granted_by
        );
    }
}

// ---------------------------------------------------------------------------------------
// Fixed window.

#[tokio::test]
async fn fixed_window_counter_always_carries_a_ttl() {
    let p = Policy::new(Config::of(FixedWindow, 3)).await;
    let fw = p.state_key("fw");
    assert_eq!(p.exists(&fw).await, 0, "nothing before the first call");
    for (permits, code) in [(2, GRANTED), (1, GRANTED), (1, DENIED), (3, DENIED)] {
        let reply = p.acquire(permits, "shop").await;
        assert_eq!(reply[0], code, "{reply:?}");
        let ttl = p.pttl(&fw).await;
        assert!((1..=LONG).contains(&ttl), "PTTL {ttl} after {reply:?}");
        // The counter dies with its window, which is what reset_after_ms says.
        assert!(ttl <= reply[3] + 1, "PTTL {ttl} vs {reply:?}");
    }
    // Windows of 20 ms, crossed many times: at every moment the key has a TTL or is gone.
    let p = Policy::new(Config::of(FixedWindow, 3).every(20)).await;
    let fw = p.state_key("fw");
    let mut seen_ttl = 0;
    for _ in 0..300 {
        let reply = p.acquire(1, "shop").await;
        assert!(reply[0] == GRANTED || reply[0] == DENIED, "{reply:?}");
        let ttl = p.pttl(&fw).await;
        assert_ne!(ttl, -1, "a counter without a TTL");
        assert!(ttl <= 20, "PTTL {ttl} beyond the window");
        if ttl > 0 {
            seen_ttl += 1;
        }
    }
    assert!(seen_ttl > 0);
}

#[tokio::test]
async fn fixed_window_denials_leave_the_count_and_the_next_window_starts_afresh() {
    let p = Policy::new(Config::of(FixedWindow, 4).every(200)).await;
    let fw = p.state_key("fw");
    assert_eq!(p.acquire(4, "shop").await[..2], [GRANTED, 0]);
    let count: Option<String> = p.query(redis::cmd("HGET").arg(&fw).arg("count")).await;
    assert_eq!(count.as_deref(), Some("4"));
    let start: i64 = p
        .query::<String>(redis::cmd("HGET").arg(&fw).arg("start"))
        .await
        .parse()
        .unwrap();
    assert_eq!(start % 200, 0, "windows are aligned on Redis time");
    for _ in 0..10 {
        let reply = p.acquire(1, "shop").await;
        if reply[0] == GRANTED {
            // The window ended meanwhile: a new one counts from 0.
            assert_eq!(reply[1], 3);
            return;
        }
        assert_eq!(reply[..2], [DENIED, 0]);
        assert_eq!(reply[2], reply[3], "both are the time to the next window");
        let count: Option<String> = p.query(redis::cmd("HGET").arg(&fw).arg("count")).await;
        assert_eq!(count.as_deref(), Some("4"), "the denial consumed nothing");
    }
}

// ---------------------------------------------------------------------------------------
// Sliding log.

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
            .arg(concat!(
                include_str!("../../../lua/lib/acquire_gate.lua"),
                include_str!("../../../lua/sliding_log.lua")
            ))
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

// ---------------------------------------------------------------------------------------
// Sliding window.

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

// ---------------------------------------------------------------------------------------
// Concurrency leases.

#[tokio::test]
async fn concurrency_release_gives_the_permits_back() {
    let p = Policy::new(Config::of(Concurrency, 4)).await;
    let leases = p.state_key("leases");
    assert_eq!(p.acquire_lease(3, "shop", "L1").await[..2], [GRANTED, 1]);
    assert_eq!(p.acquire_lease(1, "shop", "L2").await[..2], [GRANTED, 0]);
    assert_eq!(p.zcard(&leases).await, 4);
    let ttl = p.pttl(&leases).await;
    assert!(
        (1..=LONG + 2).contains(&ttl),
        "the set lives as long as its last lease: {ttl}"
    );
    let denied = p.acquire_lease(1, "shop", "L3").await;
    assert_eq!(denied[..2], [DENIED, 0]);
    assert!((1..=LONG + 1).contains(&denied[2]), "{denied:?}");
    assert_eq!(p.zcard(&leases).await, 4, "a denial takes nothing");
    // One release gives back every permit of its lease.
    let released = p.release("shop", "L1").await;
    assert_eq!(released[..3], [GRANTED, 3, 3], "{released:?}");
    assert_eq!(released[4..], [4, 1]);
    assert_eq!(p.acquire_lease(3, "shop", "L3").await[..2], [GRANTED, 0]);
    assert_eq!(p.release("shop", "L2").await[..3], [GRANTED, 1, 1]);
    assert_eq!(p.release("shop", "L3").await[..4], [GRANTED, 4, 3, 0]);
    assert_eq!(p.exists(&leases).await, 0, "no lease, no set");
}

#[tokio::test]
async fn concurrency_refuses_a_second_release_and_another_apps_release() {
    let mut c = Config::of(Concurrency, 2);
    c.apps = ",shop,other,";
    let p = Policy::new(c).await;
    let leases = p.state_key("leases");
    assert_eq!(p.acquire_lease(2, "shop", "L1").await[0], GRANTED);
    let refused = p.release("other", "L1").await;
    assert_eq!(refused[..3], [REFUSED, 0, 0], "another app's lease");
    assert_eq!(p.zcard(&leases).await, 2, "still held");
    assert_eq!(
        p.release("shop", "nope").await[0],
        REFUSED,
        "an unknown lease"
    );
    assert_eq!(p.release("shop", "L1").await[..3], [GRANTED, 2, 2]);
    assert_eq!(
        p.release("shop", "L1").await[..3],
        [REFUSED, 2, 0],
        "released twice"
    );
    assert_eq!(p.acquire_lease(2, "other", "L1").await[0], GRANTED);
    assert_eq!(
        p.release("shop", "L1").await[0],
        REFUSED,
        "same id, other app"
    );
    assert_eq!(p.release("other", "L1").await[..3], [GRANTED, 2, 2]);
}

#[tokio::test]
async fn concurrency_reclaims_expired_leases() {
    const TTL: i64 = 50;
    let p = Policy::new(Config::of(Concurrency, 1).every(TTL)).await;
    let leases = p.state_key("leases");
    let before_l1 = p.redis_us().await;
    assert_eq!(p.acquire_lease(1, "shop", "L1").await[0], GRANTED);
    let ttl = p.pttl(&leases).await;
    assert!((0..=TTL + 2).contains(&ttl), "PTTL {ttl}");
    let second = p.acquire_lease(1, "shop", "L2").await;
    if second[0] == GRANTED {
        // Only possible when L1 had expired already (a slow machine): check that it had.
        assert!(p.redis_us().await >= before_l1 + TTL * 1000, "{second:?}");
    } else {
        assert_eq!(second[..2], [DENIED, 0]);
        assert!((1..=TTL + 1).contains(&second[2]), "{second:?}");
        // L1 is never released: L2 is granted once it expires (bounded polling).
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.acquire_lease(1, "shop", "L2").await[0] != GRANTED {
            assert!(
                Instant::now() < deadline,
                "the expired lease was never reclaimed"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let score: Option<f64> = p
        .query(redis::cmd("ZSCORE").arg(&leases).arg("shop|L1|1"))
        .await;
    assert_eq!(score, None, "the expired lease was removed from the set");
    assert_eq!(
        p.release("shop", "L1").await[0],
        REFUSED,
        "expired: nothing to give back"
    );
    // L2 is never released either: the set itself goes with its last lease.
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.exists(&leases).await != 0 {
        assert_ne!(p.pttl(&leases).await, -1, "a lease set without a TTL");
        assert!(Instant::now() < deadline, "the idle set never expired");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------------------
// GCRA.

#[tokio::test]
async fn gcra_allows_a_burst_then_one_permit_per_emission_interval() {
    // 0.01 per second: one permit per 100,000 ms, bursts of 5.
    const T: f64 = 100_000.0;
    let mut c = Config::of(Gcra, 5);
    c.rate = 0.01;
    let p = Policy::new(c).await;
    let first = p.acquire(1, "shop").await;
    assert_eq!(first[..3], [GRANTED, 4, 0]);
    assert!((100_000..=100_001).contains(&first[3]), "{first:?}");
    assert_eq!(p.acquire(4, "shop").await[..2], [GRANTED, 0]);
    let tat = p.field("tat").await.unwrap();
    let denied = p.acquire(1, "shop").await;
    assert_eq!(denied[..2], [DENIED, 0]);
    assert!((99_000..=100_001).contains(&denied[2]), "{denied:?}");
    assert!((499_000..=500_001).contains(&denied[3]), "{denied:?}");
    assert_eq!(
        p.field("tat").await.unwrap(),
        tat,
        "a denial writes nothing"
    );
    // Move the arrival time back by one interval: exactly one permit is due.
    let age = |ms: f64| {
        let p = p.clone();
        async move {
            let tat: f64 = p.field("tat").await.unwrap().parse().unwrap();
            p.set_field("tat", format!("{:.17}", tat - ms)).await;
        }
    };
    age(T).await;
    assert_eq!(p.acquire(1, "shop").await[..2], [GRANTED, 0]);
    assert_eq!(p.acquire(1, "shop").await[0], DENIED);
    age(3.0 * T).await;
    assert_eq!(
        p.acquire(4, "shop").await[0],
        DENIED,
        "three intervals are three permits"
    );
    assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0]);
}

// ---------------------------------------------------------------------------------------
// sync_policy.lua and delete_if_stale.lua.

#[tokio::test]
async fn sync_policy_discards_all_state_when_the_algorithm_changes() {
    let mut c = Config::of(TokenBucket, 5);
    let p = Policy::new(c.clone()).await;
    assert_eq!(p.acquire(1, "shop").await[0], GRANTED);
    assert!(p.field("curr_permits").await.is_some());
    for algo in [
        Gcra,
        SlidingWindow,
        FixedWindow,
        SlidingLog,
        Concurrency,
        TokenBucket,
    ] {
        let old = Config::of(algo, 5);
        c = Config {
            version: c.version + 1,
            ..old
        };
        assert_eq!(p.sync(&c).await.unwrap(), 1, "{algo:?}");
        assert_eq!(
            p.sync(&c).await.unwrap(),
            0,
            "{algo:?}: the same config again"
        );
        for field in STATE_FIELDS {
            assert_eq!(p.field(field).await, None, "{algo:?}: {field} left behind");
        }
        for key in p.state_keys() {
            assert_eq!(p.exists(&key).await, 0, "{algo:?}: {key} left behind");
        }
        let reply = p.run(algo, 1, "shop", &random_suffix()).await;
        assert_eq!(reply[..2], [GRANTED, 4], "{algo:?}: a fresh start");
        // The algorithm's state is there now, for the next change to discard.
        let has_state = match algo.state_suffix() {
            Some(suffix) => p.exists(&p.state_key(suffix)).await == 1,
            None => {
                let field = match algo {
                    TokenBucket => "curr_permits",
                    Gcra => "tat",
                    _ => "sw_curr",
                };
                p.field(field).await.is_some()
            }
        };
        assert!(has_state, "{algo:?} wrote no state");
    }
}

#[tokio::test]
async fn sync_policy_resets_a_new_incarnation_or_a_new_window_only() {
    let mut c = Config::of(FixedWindow, 2);
    let p = Policy::new(c.clone()).await;
    let fw = p.state_key("fw");
    assert_eq!(p.acquire(2, "shop").await[0], GRANTED);
    // Another app and a higher max: the window's count stays.
    c.version = 2;
    c.apps = ",shop,other,";
    c.max = 3;
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(
        p.acquire(1, "other").await[..2],
        [GRANTED, 0],
        "2 of 3 were used"
    );
    // Another window: a fresh count.
    c.version = 3;
    c.window_ms = Some(30_000);
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(p.exists(&fw).await, 0);
    assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0]);
    // A new incarnation (deleted and created again): a fresh count.
    c.created = 2;
    c.version = 1;
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(p.exists(&fw).await, 0);
    assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0]);
    // An older view changes nothing.
    let mut older = c.clone();
    older.created = 1;
    older.algo = Gcra;
    assert_eq!(p.sync(&older).await.unwrap(), 0);
    assert_eq!(p.exists(&fw).await, 1);
    // A lease TTL change keeps the leases held.
    let mut c = Config::of(Concurrency, 2);
    let p = Policy::new(c.clone()).await;
    assert_eq!(p.acquire_lease(2, "shop", "L1").await[0], GRANTED);
    c.version = 2;
    c.lease_ttl_ms = Some(30_000);
    assert_eq!(p.sync(&c).await.unwrap(), 1);
    assert_eq!(p.field("lease_ttl_ms").await.as_deref(), Some("30000"));
    assert_eq!(p.acquire_lease(1, "shop", "L2").await[0], DENIED);
    assert_eq!(p.release("shop", "L1").await[..3], [GRANTED, 2, 2]);
}

#[tokio::test]
async fn sync_policy_with_six_arguments_means_token_bucket() {
    let mut c = Config::of(FixedWindow, 5);
    let p = Policy::new(c.clone()).await;
    assert_eq!(p.acquire(1, "shop").await[0], GRANTED);
    assert_eq!(p.field("algorithm").await.as_deref(), Some("fixed_window"));
    c.version = 2;
    assert_eq!(p.sync_six(&c, true).await, 1);
    assert_eq!(p.field("algorithm").await, None);
    assert_eq!(p.exists(&p.state_key("fw")).await, 0);
    assert_eq!(
        p.field("window_ms").await,
        None,
        "a parameter token_bucket does not use goes"
    );
    assert_eq!(p.run(TokenBucket, 1, "shop", "").await[..2], [GRANTED, 4]);
    assert_eq!(
        p.run(FixedWindow, 1, "shop", "").await[..2],
        [OTHER_ALGORITHM, 1]
    );
    assert_eq!(p.sync_six(&c, false).await, 0, "nothing to do");
    // An explicit token_bucket is the same config.
    c.algo = TokenBucket;
    assert_eq!(p.sync(&c).await.unwrap(), 0);
}

#[tokio::test]
async fn sync_policy_refuses_an_invalid_algorithm_config() {
    let p = Policy::new(Config::of(TokenBucket, 5)).await;
    let fresh = Policy {
        key: format!("{}-fresh", p.key),
        ..p.clone()
    };
    let mut bad = Config::of(FixedWindow, 5);
    for window in [0, -5] {
        bad.window_ms = Some(window);
        assert!(fresh.sync(&bad).await.is_err(), "window_ms {window}");
    }
    bad.window_ms = None;
    assert!(
        fresh.sync(&bad).await.is_err(),
        "fixed_window without window_ms"
    );
    let mut bad = Config::of(Concurrency, 5);
    bad.lease_ttl_ms = None;
    assert!(
        fresh.sync(&bad).await.is_err(),
        "concurrency without lease_ttl_ms"
    );
    let mut conn = p.conn.clone();
    let unknown: RedisResult<i64> = SYNC_POLICY
        .key(&fresh.key)
        .arg(1)
        .arg(1)
        .arg(5)
        .arg("1")
        .arg(",shop,")
        .arg("1")
        .arg("leaky")
        .invoke_async(&mut conn)
        .await;
    assert!(unknown.is_err(), "an unknown algorithm");
    let fractional: RedisResult<i64> = SYNC_POLICY
        .key(&fresh.key)
        .arg(1)
        .arg(1)
        .arg(5)
        .arg("1")
        .arg(",shop,")
        .arg("1")
        .arg("fixed_window")
        .arg("1.5")
        .invoke_async(&mut conn)
        .await;
    assert!(fractional.is_err(), "a fractional window");
    assert_eq!(fresh.exists(&fresh.key).await, 0, "nothing was written");
}

#[tokio::test]
async fn delete_if_stale_deletes_the_state_keys_with_the_policy() {
    let p = Policy::new(Config::of(Concurrency, 5)).await;
    assert_eq!(p.acquire_lease(1, "shop", "L1").await[0], GRANTED);
    let delete = |bound: i64| {
        let p = p.clone();
        async move {
            let mut conn = p.conn.clone();
            let mut inv = DELETE_IF_STALE.prepare_invoke();
            inv.key(&p.key);
            for k in p.state_keys() {
                inv.key(k);
            }
            inv.arg(bound);
            inv.invoke_async::<i64>(&mut conn).await.unwrap()
        }
    };
    assert_eq!(
        delete(1).await,
        0,
        "created at 1: not stale for a read at 1"
    );
    assert_eq!(p.exists(&p.state_key("leases")).await, 1);
    assert_eq!(delete(2).await, 1);
    assert_eq!(p.exists(&p.key).await, 0);
    for key in p.state_keys() {
        assert_eq!(p.exists(&key).await, 0, "{key}");
    }
}

// ---------------------------------------------------------------------------------------
// Accuracy: 32 concurrent clients for a few seconds, counted against what the algorithm
// allows over the span measured on Redis' clock (never the client's), so that the counts
// hold however fast or loaded the machine is. The rates are 200 per second: small next to
// what 32 clients ask for even on a loaded 2-core machine (thousands per second).

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
