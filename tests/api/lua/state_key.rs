//! A global token bucket's state in a key of its own (`lua/lib/token_bucket_global.lua`):
//! the configuration an instance passes decides only when it is the one Redis holds, the
//! state moves out of the hash once and stays out, and instances of the version before
//! (which read and write the state in the hash only) decide exactly beside instances that
//! leave it there, until every one of them is gone.

use ratekeeper_limiter::domain::{Algorithm, AppSlug, Mode, PolicyName, Scope};
use ratekeeper_limiter::{AcquireCall, Limiter, PolicyConfig};
use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::helpers::limiter_beside_scripts;

/// The token bucket's script of the version before the state key, as its server loaded it.
const BEFORE: &str = include_str!("../../fixtures/lua/token_bucket_before_state_key.lua");

const GRANTED: i64 = 1;
const DENIED: i64 = -1;

struct Policy {
    conn: MultiplexedConnection,
    /// Instances of this version: moving the state to its key, and leaving it where it is.
    moving: Limiter,
    leaving: Limiter,
    config: PolicyConfig,
    app: AppSlug,
}

impl Policy {
    /// A global token bucket of `max_permits` that refills about nothing during a test.
    async fn new(max_permits: i64) -> Self {
        let (limiter, conn) = limiter_beside_scripts("tbstate").await;
        let config = PolicyConfig {
            name: PolicyName::parse("p").unwrap(),
            created_ms: 7,
            version: 1,
            algorithm: Algorithm::TokenBucket,
            max_permits,
            rate: 0.0001,
            window_ms: None,
            lease_ttl_ms: None,
            apps: ",shop,".to_owned(),
            enabled: true,
            scope: Scope::Global,
            mode: Mode::Enforce,
        };
        assert!(limiter.push_policy(&config).await.unwrap());
        Self {
            conn,
            moving: limiter.clone().moving_state(true),
            leaving: limiter.moving_state(false),
            config,
            app: AppSlug::parse("shop").unwrap(),
        }
    }

    fn hash(&self) -> String {
        self.moving.keys().policy(&self.config.name)
    }

    fn state_key(&self) -> String {
        format!("{}:tb", self.hash())
    }

    /// One acquire of this version's, passing `config` (`None`: an instance that does not
    /// know the policy yet).
    async fn acquire_with(&self, limiter: &Limiter, config: Option<&PolicyConfig>) -> Vec<i64> {
        let call = AcquireCall::global(
            limiter,
            &self.config.name,
            Algorithm::TokenBucket,
            1,
            &self.app,
            config,
        );
        call.alone_cmd()
            .query_async(&mut self.conn.clone())
            .await
            .unwrap()
    }

    async fn acquire(&self, limiter: &Limiter) -> Vec<i64> {
        self.acquire_with(limiter, Some(&self.config)).await
    }

    /// One acquire of the version before, by its script.
    async fn acquire_before(&self) -> Vec<i64> {
        Script::new(BEFORE)
            .key(self.hash())
            .arg(1)
            .arg("shop")
            .invoke_async(&mut self.conn.clone())
            .await
            .unwrap()
    }

    async fn hash_field(&self, field: &str) -> Option<String> {
        redis::cmd("HGET")
            .arg(self.hash())
            .arg(field)
            .query_async(&mut self.conn.clone())
            .await
            .unwrap()
    }

    async fn state_exists(&self) -> bool {
        redis::cmd("EXISTS")
            .arg(self.state_key())
            .query_async::<i64>(&mut self.conn.clone())
            .await
            .unwrap()
            == 1
    }
}

#[tokio::test]
async fn the_state_moves_out_of_the_hash_once_and_every_instance_decides_on_it_there() {
    let p = Policy::new(10).await;
    // Left where it is: in the hash, as the version before keeps it.
    assert_eq!(p.acquire(&p.leaving).await[..2], [GRANTED, 9]);
    assert!(p.hash_field("curr_permits").await.is_some());
    assert!(!p.state_exists().await);
    // Moved by the next write of an instance that moves it, the count going on.
    assert_eq!(p.acquire(&p.moving).await[..2], [GRANTED, 8]);
    assert!(p.state_exists().await);
    assert_eq!(p.hash_field("curr_permits").await, None);
    assert_eq!(p.hash_field("last_mill_second").await, None);
    // Once there, an instance that leaves state where it is decides on it there, and so
    // does one that does not know the policy (the hash decides its configuration).
    assert_eq!(p.acquire(&p.leaving).await[..2], [GRANTED, 7]);
    assert_eq!(p.acquire_with(&p.leaving, None).await[..2], [GRANTED, 6]);
    assert_eq!(p.hash_field("curr_permits").await, None);
    // The console's view reads it there too.
    let state = p
        .moving
        .bucket_state(&p.config.name)
        .await
        .unwrap()
        .unwrap();
    assert!((state.current_permits - 6.0).abs() < 0.01, "{state:?}");
}

#[tokio::test]
async fn a_configuration_older_or_newer_than_redis_is_never_decided_with() {
    let p = Policy::new(10).await;
    assert_eq!(p.acquire(&p.moving).await[..2], [GRANTED, 9]);
    // The sync writes version 2 (capacity 5): the state keeps its tokens, clamped, and
    // takes version 2's id.
    let newer = PolicyConfig {
        version: 2,
        max_permits: 5,
        ..p.config.clone()
    };
    assert!(p.moving.push_policy(&newer).await.unwrap());
    // An instance still at version 1 (capacity 10) is answered by version 2.
    let reply = p.acquire(&p.moving).await;
    assert_eq!((reply[0], reply[1], reply[4], reply[5]), (GRANTED, 4, 5, 2));
    // An instance already at version 3 (capacity 100), which Redis has not heard of yet,
    // is answered by version 2 too.
    let ahead = PolicyConfig {
        version: 3,
        max_permits: 100,
        ..p.config.clone()
    };
    let reply = p.acquire_with(&p.moving, Some(&ahead)).await;
    assert_eq!((reply[0], reply[1], reply[4], reply[5]), (GRANTED, 3, 5, 2));
    // A policy deleted and made again starts its versions again: the same version of
    // another incarnation is another configuration.
    let again = PolicyConfig {
        created_ms: 8,
        version: 1,
        max_permits: 2,
        ..p.config.clone()
    };
    assert!(p.moving.push_policy(&again).await.unwrap());
    let reply = p.acquire(&p.moving).await;
    assert_eq!(
        (reply[0], reply[1], reply[4]),
        (GRANTED, 1, 2),
        "a new, full bucket"
    );
    let reply = p.acquire_with(&p.moving, Some(&again)).await;
    assert_eq!((reply[0], reply[1]), (GRANTED, 0));
    assert_eq!(p.acquire_with(&p.moving, Some(&again)).await[0], DENIED);
}

/// A rolling upgrade: instances of the version before and of this one, left where it is
/// (`RATEKEEPER_REDIS_STATE=hash`), take from one bucket in turns; once the version before
/// is gone, instances that move the state join and take over. Each grant sees what every
/// grant before it took, whichever version made it, and not one permit more than the
/// bucket held is granted.
#[tokio::test]
async fn versions_before_and_after_share_a_bucket_exactly_during_a_rolling_upgrade() {
    let p = Policy::new(100).await;
    let mut left = 100;
    for i in 0..60 {
        let reply = if i % 2 == 0 {
            p.acquire_before().await
        } else {
            p.acquire(&p.leaving).await
        };
        left -= 1;
        assert_eq!(reply[..2], [GRANTED, left], "call {i}");
    }
    assert!(!p.state_exists().await);
    // The version before is gone: moving and leaving instances together.
    for i in 0..60 {
        let limiter = if i % 2 == 0 { &p.moving } else { &p.leaving };
        let reply = p.acquire(limiter).await;
        if left > 0 {
            left -= 1;
            assert_eq!(reply[..2], [GRANTED, left], "call {}", 60 + i);
        } else {
            assert_eq!(reply[..2], [DENIED, 0], "call {}", 60 + i);
        }
    }
    assert!(p.state_exists().await);
    assert_eq!(p.hash_field("curr_permits").await, None);
}

/// The console's live read (`lua/policies_live.lua`) takes a global token bucket's state
/// from its state key alone when the configuration the database holds is the one that
/// last decided on it, and from the hash whenever it is not (an edit not yet synced, or
/// one synced since the last acquire).
#[tokio::test]
async fn the_live_view_reads_the_hash_only_when_the_configuration_passed_is_not_the_states() {
    use ratekeeper_limiter::{StateRead, StoredBucket};
    let p = Policy::new(10).await;
    for _ in 0..3 {
        assert_eq!(p.acquire(&p.moving).await[0], GRANTED);
    }
    let stored = |config: &PolicyConfig| {
        StateRead::TokenBucket(StoredBucket {
            max_permits: config.max_permits,
            rate: config.rate,
            version: config.version,
            created_ms: config.created_ms,
        })
    };
    let live = |read: StateRead| {
        let p = &p;
        async move {
            let name = p.config.name.clone();
            let mut views = p.moving.live_views(&[(name, read)], 0, 1).await.unwrap();
            views.remove(0).unwrap().state
        }
    };
    // Hand-edit the hash's capacity (no sync, no new version): a read of the hash shows it.
    redis::cmd("HSET")
        .arg(p.hash())
        .arg("max_permits")
        .arg(50)
        .query_async::<()>(&mut p.conn.clone())
        .await
        .unwrap();

    let passed = live(stored(&p.config)).await.expect("a state");
    assert_eq!((passed.max_permits, passed.version), (10, 1), "{passed:?}");
    assert!((passed.current_permits - 7.0).abs() < 0.01, "{passed:?}");
    assert_eq!(passed.rate, p.config.rate);
    let from_hash = live(StateRead::FromHash).await.expect("a state");
    assert_eq!((from_hash.max_permits, from_hash.version), (50, 1));
    assert!((from_hash.current_permits - 7.0).abs() < 0.01);
    // Another version, or another incarnation, than the state's: the hash answers.
    for other in [
        PolicyConfig {
            version: 2,
            ..p.config.clone()
        },
        PolicyConfig {
            created_ms: 8,
            ..p.config.clone()
        },
    ] {
        let state = live(stored(&other)).await.expect("a state");
        assert_eq!((state.max_permits, state.version), (50, 1), "{other:?}");
    }
    // No state is read for a keyed policy.
    assert_eq!(live(StateRead::Skip).await, None);

    // The sync writes version 2 (capacity 5) and the state takes its id: the database's
    // version 2 is then read from the state key, and version 1 from the hash.
    let newer = PolicyConfig {
        version: 2,
        max_permits: 5,
        ..p.config.clone()
    };
    assert!(p.moving.push_policy(&newer).await.unwrap());
    let state = live(stored(&newer)).await.expect("a state");
    assert_eq!((state.max_permits, state.version), (5, 2));
    assert!((state.current_permits - 5.0).abs() < 0.01, "{state:?}");
    let state = live(stored(&p.config)).await.expect("a state");
    assert_eq!((state.max_permits, state.version), (5, 2));
}
