//! The buckets of keyed policies (per_app, per_key): one Redis key per caller, named by a
//! hash of the policy, its incarnation, algorithm, scope and window, and the caller, so
//! that one policy's buckets spread over every master of a Redis Cluster and a change of
//! algorithm, scope or window starts them afresh (old buckets expire by themselves). The
//! policy's config comes from the instance with each call (`lua/keyed/`).

use sha2::{Digest, Sha256};

use crate::domain::{Algorithm, AppSlug, Mode, Permits};

use super::acquire::{AcquireOutcome, Decision, LeaseId, parse_reply};
use super::call::AcquireCall;
use super::{Limiter, LimiterError, PolicyConfig, ReleaseOutcome, scripts};

/// The limits one caller's bucket is decided under: the policy's, or an override's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketLimits {
    pub max_permits: i64,
    /// Permits per second; 0 for the algorithms without a rate.
    pub rate: f64,
    pub window_ms: Option<i64>,
    pub lease_ttl_ms: Option<i64>,
}

impl BucketLimits {
    /// The policy's own limits.
    pub fn of(config: &PolicyConfig) -> Self {
        Self {
            max_permits: config.max_permits,
            rate: config.rate,
            window_ms: config.window_ms,
            lease_ttl_ms: config.lease_ttl_ms,
        }
    }

    /// The algorithm's parameter as the keyed scripts take it (ARGV[3]).
    pub(super) fn param(&self, algorithm: Algorithm) -> String {
        match algorithm {
            Algorithm::TokenBucket | Algorithm::Gcra => self.rate.to_string(),
            Algorithm::FixedWindow | Algorithm::SlidingLog | Algorithm::SlidingWindow => {
                self.window_ms.unwrap_or(1).to_string()
            }
            Algorithm::Concurrency => self.lease_ttl_ms.unwrap_or(1).to_string(),
        }
    }
}

/// One caller's bucket of a keyed policy.
#[derive(Debug, Clone, Copy)]
pub struct KeyedBucket<'a> {
    pub policy: &'a PolicyConfig,
    /// The app slug (per_app) or the client's key (per_key).
    pub caller: &'a str,
    pub limits: BucketLimits,
}

impl KeyedBucket<'_> {
    /// 64 bits of SHA-256 over what makes the bucket this one: the policy's name and
    /// incarnation, the algorithm, scope and window it counts in, and the caller.
    /// Collisions (two callers sharing a bucket) are as likely as 64-bit ones.
    fn tag(&self) -> [u8; 16] {
        let mut h = Sha256::new();
        for part in [
            self.policy.name.as_str().as_bytes(),
            &self.policy.created_ms.to_le_bytes(),
            self.policy.algorithm.as_str().as_bytes(),
            self.policy.scope.as_str().as_bytes(),
            &self.limits.window_ms.unwrap_or(0).to_le_bytes(),
            self.caller.as_bytes(),
        ] {
            h.update((part.len() as u32).to_le_bytes());
            h.update(part);
        }
        // Into a fixed array: no string is allocated for the tag of every keyed acquire.
        let mut tag = [0u8; 16];
        hex::encode_to_slice(&h.finalize()[..8], &mut tag).expect("16 hex digits for 8 bytes");
        tag
    }
}

impl Limiter {
    /// The Redis key of a caller's bucket.
    pub fn keyed_key(&self, bucket: &KeyedBucket<'_>) -> String {
        let tag = bucket.tag();
        // Hex digits are ASCII: always UTF-8.
        self.keys
            .keyed_bucket(std::str::from_utf8(&tag).expect("hex digits are UTF-8"))
    }

    /// Decides an acquire of `permits` on one caller's bucket (one round trip). The app is
    /// the caller's; whether it may acquire was checked from the snapshot.
    pub async fn acquire_keyed(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        let (reply, lease) = self
            .run_keyed(bucket, permits.get(), bucket.policy.enabled, app)
            .await?;
        let outcome = parse_reply(&reply, lease, bucket.policy.algorithm)?;
        Ok(in_mode(outcome, bucket.policy.mode))
    }

    /// A caller's bucket as it stands, without changing it (the scripts read only when
    /// told the policy is disabled): `(permits available now, ms until full)`.
    pub async fn keyed_state(&self, bucket: &KeyedBucket<'_>) -> Result<(i64, i64), LimiterError> {
        let (_, invocation) = self.keyed_state_invocation(bucket);
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = self.timed(invocation.invoke_async(&mut conn)).await?;
        keyed_state_of(&reply)
    }

    /// The call that reads a caller's bucket (its acquire script, told the policy is
    /// disabled, decides nothing), with its script: to run alone or in a pipeline.
    pub(super) fn keyed_state_invocation(
        &self,
        bucket: &KeyedBucket<'_>,
    ) -> (
        &'static scripts::LuaScript,
        redis::ScriptInvocation<'static>,
    ) {
        let app = AppSlug::parse("ratekeeper").expect("a valid slug");
        let (invocation, _) = self.keyed_invocation(bucket, 1, false, &app);
        (
            scripts::keyed_acquire_script(bucket.policy.algorithm),
            invocation,
        )
    }

    /// Forgets a caller's bucket: it starts full (or empty of grants) at its next acquire.
    pub async fn reset_keyed(&self, bucket: &KeyedBucket<'_>) -> Result<bool, LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keyed_key(bucket));
        let deleted: i64 = self.timed(cmd.query_async(&mut conn)).await?;
        Ok(deleted > 0)
    }

    /// Gives back a lease of a keyed concurrency policy.
    pub async fn release_keyed(
        &self,
        bucket: &KeyedBucket<'_>,
        app: &AppSlug,
        lease: LeaseId,
    ) -> Result<ReleaseOutcome, LimiterError> {
        let mut conn = self.conn.clone();
        let mut invocation = scripts::KEYED_CONCURRENCY_RELEASE.key(self.keyed_key(bucket));
        invocation
            .arg(bucket.limits.max_permits)
            .arg(format!("{app}|{lease}|"))
            .arg(bucket.policy.version);
        let reply: Vec<i64> = self.timed(invocation.invoke_async(&mut conn)).await?;
        match reply.as_slice() {
            [1, remaining, permits, ..] => Ok(ReleaseOutcome::Released {
                remaining: *remaining,
                permits: *permits,
            }),
            [-5, ..] => Ok(ReleaseOutcome::NotHeld),
            _ => Err(LimiterError::Reply(format!("{reply:?}"))),
        }
    }

    async fn run_keyed(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: i64,
        enabled: bool,
        app: &AppSlug,
    ) -> Result<(Vec<i64>, Option<LeaseId>), LimiterError> {
        let (invocation, lease) = self.keyed_invocation(bucket, permits, enabled, app);
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = self.timed(invocation.invoke_async(&mut conn)).await?;
        Ok((reply, lease))
    }

    /// The keyed acquire script's call for `bucket`, and the lease it would take.
    fn keyed_invocation(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: i64,
        enabled: bool,
        app: &AppSlug,
    ) -> (redis::ScriptInvocation<'static>, Option<LeaseId>) {
        let call = AcquireCall::keyed(self, bucket, permits, enabled, app);
        (call.alone(), call.lease)
    }
}

/// The keyed scripts take no mode: a shadow policy's denial is made a grant here, from the
/// same snapshot the bucket's limits came from.
pub(super) fn in_mode(mut outcome: AcquireOutcome, mode: Mode) -> AcquireOutcome {
    if let AcquireOutcome::Decided { decision, .. } = &mut outcome
        && *decision == Decision::Denied
        && mode == Mode::Shadow
    {
        *decision = Decision::ShadowDenied;
    }
    outcome
}

/// A keyed state read's reply: `(permits available now, ms until full)`.
pub(super) fn keyed_state_of(reply: &[i64]) -> Result<(i64, i64), LimiterError> {
    match reply {
        [2, remaining, _, reset, ..] => Ok((*remaining, *reset)),
        _ => Err(LimiterError::Reply(format!("{reply:?}"))),
    }
}
