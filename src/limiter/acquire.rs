//! The hot path: one EVALSHA of the policy's algorithm script.

use std::fmt;

use rand::Rng;

use crate::domain::{Algorithm, AppSlug, Permits, PolicyName};

use redis::ScriptInvocation;

use super::call::AcquireCall;
use super::{Limiter, LimiterError, PolicyConfig, scripts};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Granted,
    Denied,
    /// The policy is disabled: granted without touching the bucket.
    Unenforced,
    /// The policy is in shadow mode and would have denied: granted, nothing consumed.
    ShadowDenied,
}

impl Decision {
    /// Whether the client may go ahead.
    pub fn allowed(self) -> bool {
        self != Self::Denied
    }
}

/// The id of a concurrency lease: 128 random bits, shown as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseId([u8; 16]);

impl LeaseId {
    pub(super) fn generate() -> Self {
        Self(rand::rng().random())
    }

    /// A lease id as a client sends it back; `None` if it cannot be one.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = hex::decode(text).ok()?;
        Some(Self(bytes.try_into().ok()?))
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseId({self})")
    }
}

/// What the script answered, one variant per distinct answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireOutcome {
    Decided {
        decision: Decision,
        remaining: i64,
        retry_after_ms: i64,
        reset_after_ms: i64,
        limit: i64,
        version: i64,
        /// The lease a granted concurrency permit is held under, to be released.
        lease: Option<LeaseId>,
        /// The algorithm that decided (Redis' word, which a stale caller may not know).
        algorithm: Algorithm,
    },
    NoSuchPolicy,
    AppNotAllowed,
    PermitsAboveMax {
        limit: i64,
    },
}

/// A script's answer that the policy uses another algorithm (it changed meanwhile).
pub(super) const WRONG_ALGORITHM: i64 = -4;

impl Limiter {
    /// Runs the acquire script of `algorithm` (what this instance believes the policy
    /// uses). If Redis says the policy now uses another one, the right script runs once
    /// more: two round trips only in the moment after a change of algorithm.
    pub async fn acquire(
        &self,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        let reply = self.run_acquire(name, algorithm, permits, app).await?;
        match reply.0.as_slice() {
            [WRONG_ALGORITHM, index, ..] => {
                let actual = Algorithm::from_index(*index)
                    .ok_or_else(|| LimiterError::Reply(format!("{:?}", reply.0)))?;
                let again = self.run_acquire(name, actual, permits, app).await?;
                parse_reply(&again.0, again.1, actual)
            }
            _ => parse_reply(&reply.0, reply.1, algorithm),
        }
    }

    /// Puts a policy that Redis lost (a flush, a restart without persistence, an evicted
    /// or deleted key) back from `config`, and decides the acquire on it, in one round
    /// trip: the two scripts loaded first (a restarted Redis has none), the config
    /// written, then the acquire run, on one node (the keys share a hash tag).
    pub async fn restore_and_acquire(
        &self,
        config: &PolicyConfig,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        let algorithm = config.algorithm;
        let (acquire, lease) = self.acquire_invocation(&config.name, algorithm, permits, app);
        let mut pipe = redis::pipe();
        pipe.load_script(&scripts::SYNC_POLICY)
            .ignore()
            .load_script(scripts::acquire_script(algorithm))
            .ignore()
            .invoke_script(&self.sync_invocation(config))
            .ignore()
            .invoke_script(&acquire);
        let mut conn = self.conn.clone();
        let (reply,): (Vec<i64>,) = self.timed(pipe.query_async(&mut conn)).await?;
        match reply.as_slice() {
            // Changed again meanwhile: the script of the algorithm Redis now has.
            [WRONG_ALGORITHM, ..] => self.acquire(&config.name, algorithm, permits, app).await,
            _ => parse_reply(&reply, lease, algorithm),
        }
    }

    async fn run_acquire(
        &self,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<(Vec<i64>, Option<LeaseId>), LimiterError> {
        let mut conn = self.conn.clone();
        let (invocation, lease) = self.acquire_invocation(name, algorithm, permits, app);
        let reply: Vec<i64> = self.timed(invocation.invoke_async(&mut conn)).await?;
        Ok((reply, lease))
    }

    /// The acquire script's call, with the lease it would grant (concurrency only).
    fn acquire_invocation(
        &self,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: Permits,
        app: &AppSlug,
    ) -> (ScriptInvocation<'static>, Option<LeaseId>) {
        let call = AcquireCall::global(self, name, algorithm, permits.get(), app);
        (call.alone(), call.lease)
    }
}

pub(super) fn parse_reply(
    reply: &[i64],
    lease: Option<LeaseId>,
    algorithm: Algorithm,
) -> Result<AcquireOutcome, LimiterError> {
    let &[
        code,
        remaining,
        retry_after_ms,
        reset_after_ms,
        limit,
        version,
    ] = reply
    else {
        return Err(LimiterError::Reply(format!("{reply:?}")));
    };
    let decided = |decision| AcquireOutcome::Decided {
        decision,
        remaining,
        retry_after_ms,
        reset_after_ms,
        limit,
        version,
        // A lease exists only when the script recorded one: a grant that was enforced.
        lease: if decision == Decision::Granted {
            lease
        } else {
            None
        },
        algorithm,
    };
    Ok(match code {
        1 => decided(Decision::Granted),
        -1 => decided(Decision::Denied),
        2 => decided(Decision::Unenforced),
        3 => decided(Decision::ShadowDenied),
        0 => AcquireOutcome::NoSuchPolicy,
        -2 => AcquireOutcome::AppNotAllowed,
        -3 => AcquireOutcome::PermitsAboveMax { limit },
        _ => return Err(LimiterError::Reply(format!("{reply:?}"))),
    })
}
