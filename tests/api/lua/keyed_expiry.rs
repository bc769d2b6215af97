//! A keyed token bucket's and GCRA bucket's expiry held ahead (`lua/lib/keyed.lua`'s
//! `keyed_store`): set to twice what the bucket needs and recorded in its state, then left
//! where it is by the writes that need no later one; never before the bucket is full
//! again; and instances of the version before (which read only the state without it and
//! set the exact expiry) decide exactly beside instances that set it so too, until every
//! one of them is gone.

use std::cell::Cell;
use std::time::Instant;

use ratekeeper_limiter::domain::{Algorithm, AppSlug, Mode, Permits, PolicyName, Scope};
use ratekeeper_limiter::scripts::batch_reply_integers;
use ratekeeper_limiter::{
    AcquireCall, AcquireOutcome, BucketLimits, Decided, Decision, KeyedBucket, Limiter,
    PolicyConfig,
};
use redis::Script;
use redis::aio::MultiplexedConnection;

use crate::helpers::limiter_beside_scripts;

/// The keyed scripts of the version before held expiries, as its server loaded them.
const TOKEN_BUCKET_BEFORE: &str =
    include_str!("../../fixtures/lua/keyed_token_bucket_before_held_expiry.lua");
const GCRA_BEFORE: &str = include_str!("../../fixtures/lua/keyed_gcra_before_held_expiry.lua");

/// The algorithms whose expiry is the time until the bucket is full again.
const HELD: [Algorithm; 2] = [Algorithm::TokenBucket, Algorithm::Gcra];

const GRANTED: i64 = 1;

/// One caller's bucket of a per_key token bucket or GCRA policy that refills one permit in
/// 1,000 s: the time until it is full again moves by 1,000 s per permit, and by about
/// nothing while a test runs.
struct Bucket {
    conn: MultiplexedConnection,
    /// Instances of this version: holding the expiry ahead, and setting the exact one.
    holding: Limiter,
    exact: Limiter,
    config: PolicyConfig,
    app: AppSlug,
    /// When the last acquire was sent: its decision came after.
    sent: Cell<Instant>,
}

/// What a bucket's key holds, and how long it has left.
#[derive(Debug)]
struct Stored {
    /// Bytes beyond the state the version before reads: 8 when the expiry is held.
    held_bytes: usize,
    /// The ms until which the expiry is held (24-byte state only).
    held_until: Option<f64>,
    pttl_ms: i64,
}

impl Bucket {
    async fn new(algorithm: Algorithm, max_permits: i64) -> Self {
        let (limiter, conn) = limiter_beside_scripts("keyedexp").await;
        let config = PolicyConfig {
            name: PolicyName::parse("users").unwrap(),
            created_ms: 7,
            version: 3,
            algorithm,
            max_permits,
            rate: 0.001,
            window_ms: None,
            lease_ttl_ms: None,
            apps: ",shop,".to_owned(),
            enabled: true,
            scope: Scope::PerKey,
            mode: Mode::Enforce,
        };
        Self {
            conn,
            holding: limiter.clone().holding_keyed_expiry(true),
            exact: limiter.holding_keyed_expiry(false),
            config,
            app: AppSlug::parse("shop").unwrap(),
            sent: Cell::new(Instant::now()),
        }
    }

    fn bucket(&self) -> KeyedBucket<'_> {
        KeyedBucket {
            policy: &self.config,
            caller: "alice",
            limits: BucketLimits::of(&self.config),
        }
    }

    fn key(&self) -> String {
        AcquireCall::keyed(&self.holding, &self.bucket(), 1, &self.app)
            .key()
            .to_owned()
    }

    /// An acquire by an instance of this version, alone (its keyed script).
    async fn acquire(&self, limiter: &Limiter, permits: i64) -> Decided {
        self.sent.set(Instant::now());
        let outcome = limiter
            .acquire_keyed_unbatched(&self.bucket(), Permits::parse(permits).unwrap(), &self.app)
            .await
            .unwrap();
        match outcome {
            AcquireOutcome::Decided(decided) => decided,
            other => panic!("{other:?}"),
        }
    }

    /// An acquire by an instance of this version in a call of the batch script, beside an
    /// acquire of another caller, so that the call is a batch.
    async fn acquire_batched(&self, limiter: &Limiter, permits: i64) -> [i64; 2] {
        self.sent.set(Instant::now());
        let other = KeyedBucket {
            caller: "bob",
            ..self.bucket()
        };
        let calls = [
            AcquireCall::keyed(limiter, &self.bucket(), permits, &self.app),
            AcquireCall::keyed(limiter, &other, 1, &self.app),
        ];
        let packed: Vec<u8> = AcquireCall::batch_cmd(calls.iter().map(|c| (c, 1)))
            .query_async(&mut self.conn.clone())
            .await
            .unwrap();
        let replies = batch_reply_integers(&packed).unwrap();
        [replies[0], replies[1]]
    }

    /// An acquire by an instance of the version before held expiries.
    async fn acquire_before(&self, permits: i64) -> Vec<i64> {
        self.sent.set(Instant::now());
        let before = match self.config.algorithm {
            Algorithm::Gcra => GCRA_BEFORE,
            _ => TOKEN_BUCKET_BEFORE,
        };
        Script::new(before)
            .key(self.key())
            .arg(permits)
            .arg(self.config.max_permits)
            .arg(self.config.rate.to_string())
            .arg("1")
            .arg(self.config.version)
            .invoke_async(&mut self.conn.clone())
            .await
            .unwrap()
    }

    async fn stored(&self) -> Stored {
        let mut conn = self.conn.clone();
        let raw: Vec<u8> = redis::cmd("GET")
            .arg(self.key())
            .query_async(&mut conn)
            .await
            .unwrap();
        let pttl_ms: i64 = redis::cmd("PTTL")
            .arg(self.key())
            .query_async(&mut conn)
            .await
            .unwrap();
        // The state the version before reads: a token bucket's tokens and last, GCRA's tat.
        let exact = match self.config.algorithm {
            Algorithm::Gcra => 8,
            _ => 16,
        };
        let held_bytes = raw.len() - exact;
        let held_until =
            (held_bytes == 8).then(|| f64::from_le_bytes(raw[..8].try_into().unwrap()));
        Stored {
            held_bytes,
            held_until,
            pttl_ms,
        }
    }

    /// The key lives at least until the bucket is full again, whoever wrote it: its TTL,
    /// read now, is at most the time since the last acquire was sent (and 1 ms of
    /// rounding) short of the time to full that acquire answered.
    async fn outlives_the_bucket(&self, reset_after_ms: i64) -> Stored {
        let stored = self.stored().await;
        let since_ms = i64::try_from(self.sent.get().elapsed().as_millis()).unwrap();
        assert!(
            stored.pttl_ms + since_ms + 1 >= reset_after_ms,
            "the key expires in {} ms, {since_ms} ms after the acquire that found it full again in {reset_after_ms} ms",
            stored.pttl_ms
        );
        stored
    }
}

fn granted(decided: &Decided, remaining: i64) {
    assert_eq!(
        (decided.decision, decided.remaining),
        (Decision::Granted, remaining),
        "{decided:?}"
    );
}

#[tokio::test]
async fn a_held_expiry_is_set_ahead_and_left_where_it_is_while_it_covers_the_bucket() {
    for algorithm in HELD {
        let b = Bucket::new(algorithm, 100).await;
        // Two permits missing: full again in 2,000 s, so the expiry is held 4,000 s ahead.
        let first = b.acquire(&b.holding, 2).await;
        granted(&first, 98);
        assert_eq!(first.reset_after_ms, 2_000_000);
        let set = b.outlives_the_bucket(first.reset_after_ms).await;
        assert_eq!(set.held_bytes, 8, "{algorithm:?}");
        assert!(
            set.pttl_ms > 3_999_000 && set.pttl_ms <= 4_000_002,
            "{algorithm:?}: {set:?}"
        );

        // Three missing need 3,000 s: the held expiry covers it, and stays where it was.
        let second = b.acquire(&b.holding, 1).await;
        granted(&second, 97);
        let kept = b.outlives_the_bucket(second.reset_after_ms).await;
        assert_eq!(
            kept.held_until, set.held_until,
            "{algorithm:?}: {kept:?} after {set:?}"
        );
        assert!(
            kept.pttl_ms <= set.pttl_ms,
            "{algorithm:?}: {kept:?} after {set:?}"
        );

        // Thirteen missing need 13,000 s, beyond it: held again, twice as far.
        let third = b.acquire(&b.holding, 10).await;
        granted(&third, 87);
        let moved = b.outlives_the_bucket(third.reset_after_ms).await;
        assert!(
            moved.held_until > set.held_until,
            "{algorithm:?}: {moved:?} after {set:?}"
        );
        assert!(
            moved.pttl_ms > 2 * third.reset_after_ms - 1_000,
            "{algorithm:?}: {moved:?}"
        );

        // The batch script holds it the same way.
        let [code, remaining] = b.acquire_batched(&b.holding, 1).await;
        assert_eq!((code, remaining), (GRANTED, 86));
        let batched = b.stored().await;
        assert_eq!(
            batched.held_until, moved.held_until,
            "{algorithm:?}: {batched:?} after {moved:?}"
        );
        let [code, remaining] = b.acquire_batched(&b.holding, 20).await;
        assert_eq!((code, remaining), (GRANTED, 66));
        let batched = b.outlives_the_bucket(34_000_000).await;
        assert!(
            batched.held_until > moved.held_until,
            "{algorithm:?}: {batched:?} after {moved:?}"
        );
    }
}

#[tokio::test]
async fn an_exact_instance_sets_the_exact_expiry_in_the_state_the_version_before_reads() {
    for algorithm in HELD {
        let b = Bucket::new(algorithm, 100).await;
        let first = b.acquire(&b.exact, 2).await;
        granted(&first, 98);
        let stored = b.outlives_the_bucket(first.reset_after_ms).await;
        assert_eq!(stored.held_bytes, 0, "{algorithm:?}");
        assert!(
            stored.pttl_ms <= first.reset_after_ms + 1,
            "{algorithm:?}: {stored:?}"
        );
        let [code, remaining] = b.acquire_batched(&b.exact, 1).await;
        assert_eq!((code, remaining), (GRANTED, 97));
        let stored = b.outlives_the_bucket(3_000_000 - 1_000).await;
        assert_eq!(stored.held_bytes, 0, "{algorithm:?}");
        assert!(stored.pttl_ms <= 3_000_001, "{algorithm:?}: {stored:?}");
    }
}

/// A rolling upgrade: instances of the version before and of this one, setting the exact
/// expiry (`RATEKEEPER_KEYED_EXPIRY=exact`), take from one caller's bucket in turns; once
/// the version before is gone, instances that hold the expiry join. Each grant sees what
/// every grant before it took, whichever version made it, no permit more than the bucket
/// held is granted, and the key outlives the bucket after every write.
#[tokio::test]
async fn versions_before_and_after_share_a_keyed_bucket_exactly_during_a_rolling_upgrade() {
    for algorithm in HELD {
        let b = Bucket::new(algorithm, 60).await;
        let mut left = 60;
        for i in 0..30 {
            left -= 1;
            let reset = if i % 2 == 0 {
                let reply = b.acquire_before(1).await;
                assert_eq!(reply[..2], [GRANTED, left], "{algorithm:?}: call {i}");
                reply[3]
            } else {
                let decided = b.acquire(&b.exact, 1).await;
                granted(&decided, left);
                decided.reset_after_ms
            };
            assert_eq!(
                b.outlives_the_bucket(reset).await.held_bytes,
                0,
                "{algorithm:?}: call {i}"
            );
        }
        // The version before is gone: holding and exact instances together.
        for i in 0..40 {
            let limiter = if i % 2 == 0 { &b.holding } else { &b.exact };
            let decided = b.acquire(limiter, 1).await;
            if left > 0 {
                left -= 1;
                granted(&decided, left);
                b.outlives_the_bucket(decided.reset_after_ms).await;
            } else {
                assert_eq!(
                    (decided.decision, decided.remaining),
                    (Decision::Denied, 0),
                    "{algorithm:?}: call {}",
                    30 + i
                );
            }
        }
    }
}
