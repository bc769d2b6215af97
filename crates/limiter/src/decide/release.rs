//! Giving a concurrency lease back (`POST /v1/release`).

use crate::client::{Limiter, LimiterError, StateKey, scripts};
use crate::decide::decision::LeaseId;
use crate::decide::keyed::KeyedBucket;
use crate::decide::reply::Code;
use crate::domain::{Algorithm, AppSlug, PolicyName};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOutcome {
    Released {
        remaining: i64,
        permits: i64,
    },
    /// No such lease held by this application: never acquired, expired, already
    /// released, or another application's.
    NotHeld,
    NoSuchPolicy,
    /// The policy uses this algorithm, which hands out no leases.
    NotLeased(Algorithm),
}

impl Limiter {
    pub async fn release(
        &self,
        name: &PolicyName,
        app: &AppSlug,
        lease: LeaseId,
    ) -> Result<ReleaseOutcome, LimiterError> {
        let mut conn = self.conn.clone();
        let mut invocation = scripts::CONCURRENCY_RELEASE.key(self.keys.policy(name));
        invocation.key(self.keys.state(name, StateKey::Leases));
        invocation.arg(app.as_str()).arg(lease.to_string());
        let reply: Vec<i64> = self.timed(invocation.invoke_async(&mut conn)).await?;
        released(&reply)
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
        released(&reply)
    }
}

/// A release script's reply (global or keyed) as what it did.
fn released(reply: &[i64]) -> Result<ReleaseOutcome, LimiterError> {
    let unexpected = || LimiterError::Reply(format!("{reply:?}"));
    let (&code, rest) = reply.split_first().ok_or_else(unexpected)?;
    match (Code::of(code), rest) {
        (Some(Code::Granted), [remaining, permits, ..]) => Ok(ReleaseOutcome::Released {
            remaining: *remaining,
            permits: *permits,
        }),
        (Some(Code::NotHeld), _) => Ok(ReleaseOutcome::NotHeld),
        (Some(Code::NoSuchPolicy), _) => Ok(ReleaseOutcome::NoSuchPolicy),
        (Some(Code::WrongAlgorithm), [index, ..]) => Algorithm::from_index(*index)
            .map(ReleaseOutcome::NotLeased)
            .ok_or_else(unexpected),
        _ => Err(unexpected()),
    }
}
