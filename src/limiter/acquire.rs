//! The hot path: one EVALSHA of the token-bucket script.

use crate::domain::{AppSlug, Permits, PolicyName};

use super::{Limiter, LimiterError, scripts};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Granted,
    Denied,
    /// The policy is disabled: granted without touching the bucket.
    Unenforced,
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
    },
    NoSuchPolicy,
    AppNotAllowed,
    PermitsAboveMax {
        limit: i64,
    },
}

impl Limiter {
    pub async fn acquire(
        &self,
        name: &PolicyName,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        let mut conn = self.conn.clone();
        let mut invocation = scripts::TOKEN_BUCKET.key(self.keys.policy(name));
        invocation.arg(permits.get()).arg(app.as_str());
        let reply: Vec<i64> = self.timed(invocation.invoke_async(&mut conn)).await?;
        parse_reply(&reply)
    }
}

pub(super) fn parse_reply(reply: &[i64]) -> Result<AcquireOutcome, LimiterError> {
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
    };
    Ok(match code {
        1 => decided(Decision::Granted),
        -1 => decided(Decision::Denied),
        2 => decided(Decision::Unenforced),
        0 => AcquireOutcome::NoSuchPolicy,
        -2 => AcquireOutcome::AppNotAllowed,
        -3 => AcquireOutcome::PermitsAboveMax { limit },
        _ => return Err(LimiterError::Reply(format!("{reply:?}"))),
    })
}
