//! The buckets of keyed policies (per_app, per_key): one Redis key per caller, named by a
//! hash of the policy, its incarnation, algorithm, scope and window, and the caller, so
//! that one policy's buckets spread over every master of a Redis Cluster and a change of
//! algorithm, scope or window starts them afresh (old buckets expire by themselves). The
//! policy's config comes from the instance with each call (`lua/keyed/`).

use sha2::{Digest, Sha256};

use crate::client::{Limiter, LimiterError};
use crate::domain::Algorithm;
use crate::policy_config::PolicyConfig;

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
    pub(crate) fn param(&self, algorithm: Algorithm) -> String {
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

    /// Forgets a caller's bucket: it starts full (or empty of grants) at its next acquire.
    pub async fn reset_keyed(&self, bucket: &KeyedBucket<'_>) -> Result<bool, LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keyed_key(bucket));
        let deleted: i64 = self.timed(cmd.query_async(&mut conn)).await?;
        Ok(deleted > 0)
    }
}
