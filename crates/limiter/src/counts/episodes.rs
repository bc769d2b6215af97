//! The episodes webhooks report, kept in Redis once for every instance
//! (`lua/episodes.lua`): a policy starts denying, recovers after a quiet period, nears its
//! limit. Each instance passes what its flush saw; the one call that changes an episode
//! is answered the change, so N instances report it once.

use redis::Value;

use crate::client::{Limiter, LimiterError, scripts};

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The first denial after a quiet period.
    Denying,
    /// A quiet period without a denial after an episode of them.
    Recovered,
    /// The remaining fraction fell below the threshold (again after it was above).
    NearLimit,
}

/// One change, to be reported by the caller that got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeChange {
    pub transition: Transition,
    /// The member the caller named ("<webhook> <policy>").
    pub member: String,
    /// When the episode began, by Redis' clock (ms); for a near limit, now.
    pub since_ms: i64,
}

/// A member that denied since the caller's last call, and its quiet period.
#[derive(Debug, Clone, Copy)]
pub struct Denied<'a> {
    pub member: &'a str,
    pub quiet_ms: i64,
}

/// A member watched for nearing its limit, and whether it is near now.
#[derive(Debug, Clone, Copy)]
pub struct Nearness<'a> {
    pub member: &'a str,
    pub near: bool,
}

impl Limiter {
    /// Passes what this instance saw; gives back the changes it is the one to report.
    /// Episodes that ended (their quiet period passed) are among them, whoever calls.
    #[tracing::instrument(level = "debug", skip_all, fields(denied = denied.len(), near = near.len()))]
    pub async fn episodes(
        &self,
        denied: &[Denied<'_>],
        near: &[Nearness<'_>],
    ) -> Result<Vec<EpisodeChange>, LimiterError> {
        let mut invocation = scripts::EPISODES.prepare_invoke();
        for key in self.keys.episodes() {
            invocation.key(key);
        }
        invocation.arg(denied.len());
        for d in denied {
            invocation.arg(d.member).arg(d.quiet_ms);
        }
        invocation.arg(near.len());
        for n in near {
            invocation.arg(n.member).arg(if n.near { "1" } else { "0" });
        }
        let mut conn = self.conn.clone();
        let reply: Vec<Value> = self.timed(invocation.invoke_async(&mut conn)).await?;
        reply.chunks(3).map(change).collect()
    }
}

fn change(triple: &[Value]) -> Result<EpisodeChange, LimiterError> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let bad = || LimiterError::Reply(format!("episode change {triple:?}"));
    let [kind, member, since] = triple else {
        return Err(bad());
    };
    let transition = match text(kind).as_deref() {
        Some("denying") => Transition::Denying,
        Some("recovered") => Transition::Recovered,
        Some("near_limit") => Transition::NearLimit,
        _ => return Err(bad()),
    };
    let since_ms = match since {
        Value::Int(n) => *n,
        other => text(other).and_then(|t| t.parse().ok()).ok_or_else(bad)?,
    };
    Ok(EpisodeChange {
        transition,
        member: text(member).ok_or_else(bad)?,
        since_ms,
    })
}
