//! The other rate-limit algorithms' Lua scripts (fixed window, sliding log, sliding window,
//! concurrency leases, GCRA) driven straight through Redis, next to the token bucket: their
//! shared checks, each one's semantics, the sync script's state resets, and accuracy under
//! 32 concurrent clients, counted against the span measured on Redis' own clock.
//!
//! One file per area: `every_script` (the checks every acquire script shares),
//! `fixed_window`, `sliding_log`, `sliding_window`, `concurrency`, `gcra`, `give_back`
//! (refunds and undone grants, and acquire_all.lua), `sync_scripts`
//! (sync_policy.lua and delete_if_stale.lua) and `accuracy`. The policy fixture below
//! (`Config`, `Policy`) and the reply codes are shared by them.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;
use redis::{FromRedisValue, RedisResult};

use crate::helpers::{random_suffix, redis_url, test_prefix};
use crate::lua::scripts::*;

mod accuracy;
mod concurrency;
mod every_script;
mod fixed_window;
mod gcra;
mod give_back;
mod sliding_log;
mod sliding_window;
mod sync_scripts;

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
const STATE_SUFFIXES: [&str; 5] = ["tb", "fw", "log", "sw", "leases"];

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

/// A reply and the Redis time (µs) read just before and just after its script ran, in the
/// same MULTI/EXEC: the script's own clock read lies between the two.
#[derive(Debug, Clone)]
struct Timed {
    before_us: i64,
    reply: Reply,
    after_us: i64,
}

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
        let key = format!("{}:{{p}}", test_prefix("algo"));
        let p = Self {
            conn,
            key,
            algo: config.algo,
        };
        assert_eq!(p.sync(&config).await.unwrap(), 1);
        let mut conn = p.conn.clone();
        for algo in Algo::ALL {
            algo.script().load_async(&mut conn).await.unwrap();
        }
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
        inv.arg(permits).arg(app).arg(algo.config_args());
        if matches!(algo, SlidingLog | Concurrency) {
            inv.arg(id);
        }
        inv.invoke_async(&mut conn).await.unwrap()
    }

    /// The EVALSHA of `algo`'s acquire script on this policy, to run inside a MULTI/EXEC
    /// (`new` loaded the scripts: a transaction cannot load one on a NOSCRIPT, and no test
    /// flushes the script cache of the shared Redis).
    fn acquire_cmd(&self, algo: Algo, permits: i64, app: &str, id: &str) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(algo.script().get_hash());
        match algo.state_suffix() {
            Some(suffix) => cmd.arg(2).arg(&self.key).arg(self.state_key(suffix)),
            None => cmd.arg(1).arg(&self.key),
        };
        cmd.arg(permits).arg(app).arg(algo.config_args());
        if matches!(algo, SlidingLog | Concurrency) {
            cmd.arg(id);
        }
        cmd
    }

    /// Runs `commands` in one MULTI/EXEC between two readings of Redis' clock (µs): Redis
    /// runs nothing else in between, so whatever the commands did happened at a Redis time
    /// inside that bracket, however slow or loaded the client is.
    async fn atomically(&self, commands: Vec<redis::Cmd>) -> (i64, Vec<redis::Value>, i64) {
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("TIME");
        for command in commands {
            pipe.add_command(command);
        }
        pipe.cmd("TIME");
        let mut conn = self.conn.clone();
        let mut values: Vec<redis::Value> = pipe.query_async(&mut conn).await.unwrap();
        let micros = |v: redis::Value| {
            let (s, us) = <(i64, i64)>::from_redis_value(v).unwrap();
            s * 1_000_000 + us
        };
        let after = micros(values.pop().unwrap());
        let before = micros(values.remove(0));
        (before, values, after)
    }

    /// One acquire of `permits`, bracketed by Redis' clock (see `atomically`).
    async fn timed_acquire(&self, permits: i64) -> Timed {
        let cmd = self.acquire_cmd(self.algo, permits, "shop", &random_suffix());
        let (before_us, mut values, after_us) = self.atomically(vec![cmd]).await;
        Timed {
            before_us,
            reply: Reply::from_redis_value(values.remove(0)).unwrap(),
            after_us,
        }
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
