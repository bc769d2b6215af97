//! Giving a concurrency lease back (`POST /v1/release`).

use crate::domain::{Algorithm, AppSlug, PolicyName};

use super::{LeaseId, Limiter, LimiterError, StateKey, scripts};

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
        match reply.as_slice() {
            [1, remaining, permits, ..] => Ok(ReleaseOutcome::Released {
                remaining: *remaining,
                permits: *permits,
            }),
            [-5, ..] => Ok(ReleaseOutcome::NotHeld),
            [0, ..] => Ok(ReleaseOutcome::NoSuchPolicy),
            [-4, index, ..] => Algorithm::from_index(*index)
                .map(ReleaseOutcome::NotLeased)
                .ok_or_else(|| LimiterError::Reply(format!("{reply:?}"))),
            _ => Err(LimiterError::Reply(format!("{reply:?}"))),
        }
    }
}
