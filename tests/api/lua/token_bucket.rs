//! The Lua scripts driven straight through Redis: the token bucket's semantics, and the
//! sync script's promise never to refill a bucket on an unrelated change.

use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::helpers::{PrivateRedis, redis_url, test_prefix};

// The scripts as the server loads them (with the algorithm numbers ahead of them).
fn bucket() -> Script {
    Script::new(ratekeeper_limiter::scripts::TOKEN_BUCKET.source())
}

fn sync_script() -> Script {
    Script::new(ratekeeper_limiter::scripts::SYNC_POLICY.source())
}

struct Bucket {
    conn: MultiplexedConnection,
    key: String,
}

/// {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
type Reply = Vec<i64>;

impl Bucket {
    /// A configured bucket under a key of its own.
    async fn new(max_permits: i64, rate: f64, apps: &str) -> Self {
        Self::on(&redis_url(), max_permits, rate, apps).await
    }

    async fn on(url: &str, max_permits: i64, rate: f64, apps: &str) -> Self {
        let client = redis::Client::open(url).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let key = format!("{}:{{p}}", test_prefix("lua"));
        let b = Self { conn, key };
        b.sync(1, 1, max_permits, rate, apps, true).await;
        b
    }

    async fn sync(
        &self,
        created: i64,
        version: i64,
        max: i64,
        rate: f64,
        apps: &str,
        enabled: bool,
    ) -> i64 {
        let mut conn = self.conn.clone();
        sync_script()
            .key(&self.key)
            .arg(created)
            .arg(version)
            .arg(max)
            .arg(rate.to_string())
            .arg(apps)
            .arg(if enabled { "1" } else { "0" })
            .invoke_async(&mut conn)
            .await
            .unwrap()
    }

    /// An acquire as an instance that does not know the policy (its hash decides) and
    /// leaves the state in the hash (`lua/lib/token_bucket_global.lua`): these tests read
    /// and age the state there.
    async fn acquire(&self, permits: i64, app: &str) -> Reply {
        let mut conn = self.conn.clone();
        bucket()
            .key(&self.key)
            .key(format!("{}:tb", self.key))
            .arg(permits)
            .arg(app)
            .arg(&["0", "0", "0", "-", "-", "0"])
            .invoke_async(&mut conn)
            .await
            .unwrap()
    }

    async fn field(&self, name: &str) -> Option<String> {
        let mut conn = self.conn.clone();
        redis::cmd("HGET")
            .arg(&self.key)
            .arg(name)
            .query_async(&mut conn)
            .await
            .unwrap()
    }

    /// Redis' clock, in ms.
    async fn redis_ms(&self) -> f64 {
        let mut conn = self.conn.clone();
        let (s, us): (f64, f64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        s * 1000.0 + us / 1000.0
    }

    async fn tokens(&self) -> f64 {
        self.field("curr_permits").await.unwrap().parse().unwrap()
    }

    async fn set(&self, name: &str, value: String) {
        let mut conn = self.conn.clone();
        redis::cmd("HSET")
            .arg(&self.key)
            .arg(name)
            .arg(value)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap();
    }

    /// Pretends `ms` more have passed since the last grant, by moving its time back.
    async fn age(&self, ms: f64) {
        let last: f64 = self
            .field("last_mill_second")
            .await
            .unwrap()
            .parse()
            .unwrap();
        self.set("last_mill_second", format!("{:.17}", last - ms))
            .await;
    }
}

const GRANTED: i64 = 1;
const DENIED: i64 = -1;
const NO_POLICY: i64 = 0;
const NOT_ALLOWED: i64 = -2;
const ABOVE_MAX: i64 = -3;
const UNENFORCED: i64 = 2;

#[tokio::test]
async fn a_new_bucket_starts_full() {
    let b = Bucket::new(5, 1.0, ",shop,").await;
    let reply = b.acquire(5, "shop").await;
    assert_eq!(reply, vec![GRANTED, 0, 0, 5000, 5, 1]);
}

#[tokio::test]
async fn a_missing_key_is_no_policy() {
    let b = Bucket::new(5, 1.0, ",shop,").await;
    let mut conn = b.conn.clone();
    let missing = format!("{}-missing", b.key);
    let reply: Reply = bucket()
        .key(&missing)
        .key(format!("{missing}:tb"))
        .arg(1)
        .arg("shop")
        .arg(&["0", "0", "0", "-", "-", "0"])
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(reply[0], NO_POLICY);
}

#[tokio::test]
async fn membership_is_exact_not_a_pattern() {
    let b = Bucket::new(100, 1.0, ",myapp,my-app,").await;
    assert_eq!(
        b.acquire(1, "app").await[0],
        NOT_ALLOWED,
        "`app` is not `myapp`"
    );
    assert_eq!(b.acquire(1, "my").await[0], NOT_ALLOWED);
    assert_eq!(
        b.acquire(1, "a[").await[0],
        NOT_ALLOWED,
        "no Lua pattern error"
    );
    assert_eq!(
        b.acquire(1, "my.app").await[0],
        NOT_ALLOWED,
        "'.' is no wildcard"
    );
    assert_eq!(
        b.acquire(1, "my-app").await[0],
        GRANTED,
        "`my-app` matches itself"
    );
    assert_eq!(b.acquire(1, "myapp").await[0], GRANTED);
}

#[tokio::test]
async fn a_denial_consumes_nothing_and_says_when_to_retry() {
    // 2 per 1000 s, capacity 10: time passes by `age` alone (real time would need 500 s
    // to bring a permit).
    let b = Bucket::new(10, 0.002, ",shop,").await;
    assert_eq!(b.acquire(10, "shop").await[0], GRANTED);
    let before = b.field("curr_permits").await;
    let reply = b.acquire(1, "shop").await;
    assert_eq!(reply[0], DENIED);
    assert_eq!(reply[1], 0, "nothing remains");
    // One permit takes 500,000 ms, less the time since the grant; the full bucket needs 9
    // permits (4,500,000 ms) more than that, whatever time passed (±1 for rounding).
    assert!(
        (1..=500_000).contains(&reply[2]),
        "retry_after_ms {}",
        reply[2]
    );
    assert!(
        (4_499_999..=4_500_001).contains(&(reply[3] - reply[2])),
        "reset_after_ms {} vs retry_after_ms {}",
        reply[3],
        reply[2]
    );
    assert_eq!(
        b.field("curr_permits").await,
        before,
        "the denial wrote nothing"
    );
    // Many denials later the bucket is no emptier: they cost nothing.
    for _ in 0..20 {
        assert_eq!(b.acquire(1, "shop").await[0], DENIED);
    }
    b.age(500_000.0).await;
    assert_eq!(
        b.acquire(1, "shop").await[0],
        GRANTED,
        "the permit came when promised"
    );
}

#[tokio::test]
async fn fractional_rates_refill_slowly_but_surely() {
    // 0.5 per 1000 s: one permit every 2,000 s, of which the test ages the bucket by
    // halves (real time would need 1,000 s to add the other half).
    let b = Bucket::new(1, 0.0005, ",shop,").await;
    assert_eq!(b.acquire(1, "shop").await[0], GRANTED);
    let denied = b.acquire(1, "shop").await;
    assert_eq!(denied[0], DENIED);
    assert!(
        (1..=2_000_000).contains(&denied[2]),
        "retry_after_ms {}",
        denied[2]
    );
    assert!(
        (denied[3] - denied[2]).abs() <= 1,
        "one permit is the whole bucket: retry and reset agree"
    );
    b.age(1_000_000.0).await;
    assert_eq!(
        b.acquire(1, "shop").await[0],
        DENIED,
        "half a permit is not one"
    );
    b.age(1_000_000.0).await;
    assert_eq!(
        b.acquire(1, "shop").await[0],
        GRANTED,
        "2,000 s make one permit"
    );
}

#[tokio::test]
async fn refill_keeps_every_fraction_over_many_calls() {
    // The seed floored each refill: 3/s polled every 500 ms gave 2/s. Here 200 polls of
    // 500 ms at 3/s earn exactly 300 permits, of which the polls take 200.
    let b = Bucket::new(1000, 3.0, ",shop,").await;
    let started = b.redis_ms().await;
    assert_eq!(b.acquire(1000, "shop").await[0], GRANTED);
    for _ in 0..200 {
        b.age(500.0).await;
        assert_eq!(b.acquire(1, "shop").await[0], GRANTED);
    }
    let real_ms = b.redis_ms().await - started;
    let left = b.tokens().await;
    // Real time passing during the loop adds its own share, 3 permits per real second.
    let most = 100.0 + real_ms * 3.0 / 1000.0 + 1e-6;
    assert!(
        (100.0 - 1e-6..=most).contains(&left),
        "tokens left {left}, expected 100 to {most}"
    );
}

#[tokio::test]
async fn permits_above_capacity_are_refused_not_denied_forever() {
    let b = Bucket::new(3, 1.0, ",shop,").await;
    assert_eq!(b.acquire(4, "shop").await[0], ABOVE_MAX);
    assert_eq!(b.acquire(0, "shop").await[0], ABOVE_MAX);
    assert_eq!(
        b.acquire(-2, "shop").await[0],
        ABOVE_MAX,
        "negative permits never add tokens"
    );
    assert_eq!(b.acquire(3, "shop").await[0], GRANTED);
}

#[tokio::test]
async fn a_lowered_capacity_clamps_the_bucket() {
    let b = Bucket::new(10, 0.001, ",shop,").await;
    assert_eq!(
        b.acquire(1, "shop").await,
        vec![GRANTED, 9, 0, 1_000_000, 10, 1]
    );
    assert_eq!(b.sync(1, 2, 3, 0.001, ",shop,", true).await, 1);
    assert!(b.tokens().await <= 3.0);
    assert_eq!(b.acquire(4, "shop").await[0], ABOVE_MAX);
    let reply = b.acquire(3, "shop").await;
    assert_eq!((reply[0], reply[1], reply[4], reply[5]), (GRANTED, 0, 3, 2));
}

#[tokio::test]
async fn an_unrelated_update_never_refills() {
    let b = Bucket::new(5, 0.001, ",shop,").await;
    assert_eq!(b.acquire(5, "shop").await[0], GRANTED);
    // A new version that changes the apps (not the rate, not the capacity).
    assert_eq!(b.sync(1, 2, 5, 0.001, ",shop,other,", true).await, 1);
    assert_eq!(b.acquire(1, "shop").await[0], DENIED, "still empty");
    // The same config again is no write at all.
    assert_eq!(b.sync(1, 2, 5, 0.001, ",shop,other,", true).await, 0);
    assert_eq!(b.acquire(1, "other").await[0], DENIED);
}

#[tokio::test]
async fn a_rate_change_settles_at_the_old_rate_then_refills_at_the_new() {
    let b = Bucket::new(100, 1.0, ",shop,").await;
    assert_eq!(b.acquire(100, "shop").await[0], GRANTED);
    b.age(10_000.0).await; // 10 permits earned at 1/s
    assert_eq!(b.sync(1, 2, 100, 50.0, ",shop,", true).await, 1);
    let tokens = b.tokens().await;
    // 10 earned at the old 1/s (plus real time, at 1/s); at the new 50/s it would be 100.
    assert!(
        (10.0..20.0).contains(&tokens),
        "settled {tokens}, expected 10"
    );
}

#[tokio::test]
async fn an_older_view_never_overwrites_a_newer_one() {
    let b = Bucket::new(5, 1.0, ",shop,").await;
    assert_eq!(b.sync(1, 3, 7, 1.0, ",shop,", true).await, 1);
    assert_eq!(
        b.sync(1, 2, 9, 1.0, ",shop,", true).await,
        0,
        "version 2 < 3"
    );
    assert_eq!(b.field("max_permits").await.as_deref(), Some("7"));
    // A policy deleted and created again is a new incarnation: it wins, with a full bucket.
    assert_eq!(b.acquire(7, "shop").await[0], GRANTED);
    assert_eq!(b.sync(2, 1, 4, 1.0, ",shop,", true).await, 1);
    assert_eq!(
        b.acquire(4, "shop").await[0],
        GRANTED,
        "the new incarnation starts full"
    );
}

#[tokio::test]
async fn a_disabled_policy_grants_without_touching_the_bucket() {
    let b = Bucket::new(2, 0.001, ",shop,").await;
    assert_eq!(b.acquire(2, "shop").await[0], GRANTED);
    let before = b.field("curr_permits").await;
    assert_eq!(b.sync(1, 2, 2, 0.001, ",shop,", false).await, 1);
    for _ in 0..5 {
        assert_eq!(b.acquire(1, "shop").await[0], UNENFORCED);
    }
    assert_eq!(b.field("curr_permits").await, before);
    assert_eq!(
        b.acquire(1, "other").await[0],
        NOT_ALLOWED,
        "membership still holds"
    );
    assert_eq!(b.sync(1, 3, 2, 0.001, ",shop,", true).await, 1);
    assert_eq!(
        b.acquire(1, "shop").await[0],
        DENIED,
        "enforced again, still empty"
    );
}

#[tokio::test]
async fn a_flushed_script_cache_is_reloaded() {
    // A Redis of its own: flushing the shared one's cache would race other tests.
    let redis = PrivateRedis::start().await;
    let b = Bucket::on(&redis.url(), 10, 1.0, ",shop,").await;
    assert_eq!(b.acquire(1, "shop").await[0], GRANTED);
    let mut conn = b.conn.clone();
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async::<String>(&mut conn)
        .await
        .unwrap();
    assert_eq!(b.acquire(1, "shop").await[..2], [GRANTED, 8]);
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async::<String>(&mut conn)
        .await
        .unwrap();
    assert_eq!(b.sync(1, 2, 10, 1.0, ",shop,", true).await, 1);
}

#[tokio::test]
async fn a_clock_that_goes_back_refills_nothing() {
    let b = Bucket::new(5, 1.0, ",shop,").await;
    assert_eq!(b.acquire(5, "shop").await[0], GRANTED);
    // The last grant seems to lie a minute in the future (a failover to a slower clock).
    b.age(-60_000.0).await;
    assert_eq!(b.acquire(1, "shop").await[0], DENIED);
    assert!(b.tokens().await < 0.01);
}
