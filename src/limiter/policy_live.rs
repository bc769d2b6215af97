//! Everything a policy's page shows from Redis, in one pipeline (one round trip; one slot on
//! a cluster, as every key read carries the policy's hash tag): its state, its usage over
//! the last hour, day and week, and its top callers over each span asked for.

use redis::Value;

use crate::domain::PolicyName;

use super::keyed::keyed_state_of;
use super::state::parse_state;
use super::top_keys::{Scored, most};
use super::{
    BucketState, CallerCount, KeyedBucket, Limiter, LimiterError, MinuteCounts, UsageSpan, scripts,
};

/// A policy's page as Redis holds it now.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyLive {
    /// `None` for a keyed policy, or when Redis does not hold it.
    pub state: Option<BucketState>,
    /// 60 minutes, oldest first.
    pub hour: Vec<MinuteCounts>,
    /// 96 quarter hours.
    pub day: Vec<MinuteCounts>,
    /// 168 hours.
    pub week: Vec<MinuteCounts>,
    /// Per span asked for: `(granted, denied)` top callers, most first.
    pub top: Vec<(Vec<CallerCount>, Vec<CallerCount>)>,
    /// The caller's bucket looked up, if one was: `(permits available, ms until full)`.
    pub lookup: Option<(i64, i64)>,
}

impl Limiter {
    /// The page's Redis part for `name`, its top callers over each of `top_spans` minutes
    /// (1 to 60), `top_limit` each, and the bucket of one caller (`lookup`) of a keyed
    /// policy: in the same pipeline on a single node; on a cluster, where that bucket
    /// lives in another slot, by a second call in flight at the same time.
    #[tracing::instrument(level = "debug", skip_all, fields(policy = %name))]
    pub async fn policy_live(
        &self,
        name: &PolicyName,
        now_minute: i64,
        top_spans: &[i64],
        top_limit: usize,
        lookup: Option<&KeyedBucket<'_>>,
    ) -> Result<PolicyLive, LimiterError> {
        if self.conn.is_cluster()
            && let Some(bucket) = lookup
        {
            let (live, state) = futures_util::future::join(
                self.one_pipeline(name, now_minute, top_spans, top_limit, None),
                self.keyed_state(bucket),
            )
            .await;
            let mut live = live?;
            live.lookup = Some(state?);
            return Ok(live);
        }
        self.one_pipeline(name, now_minute, top_spans, top_limit, lookup)
            .await
    }

    async fn one_pipeline(
        &self,
        name: &PolicyName,
        now_minute: i64,
        top_spans: &[i64],
        top_limit: usize,
        lookup: Option<&KeyedBucket<'_>>,
    ) -> Result<PolicyLive, LimiterError> {
        let policy = name.as_str();
        let minute_strings = UsageSpan::DAY.strings(now_minute);
        let hour_strings = UsageSpan::WEEK.strings(now_minute);
        let mut pipe = redis::pipe();
        // Loaded first, so a flushed script cache is no error.
        pipe.load_script(&scripts::POLICY_STATE).ignore();
        pipe.invoke_script(&self.state_invocation(name));
        for &minutes in top_spans {
            self.queue_top(&mut pipe, policy, now_minute, minutes);
        }
        pipe.cmd("MGET").arg(
            minute_strings
                .iter()
                .map(|&h| self.keys.usage_minutes(policy, h))
                .collect::<Vec<_>>(),
        );
        pipe.cmd("MGET").arg(
            hour_strings
                .iter()
                .map(|&d| self.keys.usage_hours(policy, d))
                .collect::<Vec<_>>(),
        );
        if let Some(bucket) = lookup {
            let (script, invocation) = self.keyed_state_invocation(bucket);
            pipe.load_script(script).ignore();
            pipe.invoke_script(&invocation);
        }
        let mut conn = self.conn.clone();
        let mut replies: Vec<Value> = self.timed(pipe.query_async(&mut conn)).await?;
        let lookup = match lookup {
            Some(_) => {
                let reply = replies.pop().unwrap_or(Value::Nil);
                let reply: Vec<i64> = redis::from_redis_value_ref(&reply)
                    .map_err(|_| LimiterError::Reply(format!("keyed state: {reply:?}")))?;
                Some(keyed_state_of(&reply)?)
            }
            None => None,
        };
        let bad = |what: &str| LimiterError::Reply(format!("{what}: {replies:?}"));
        let expected = 1 + 2 * top_spans.len() + 2;
        if replies.len() != expected {
            return Err(bad("reply count"));
        }
        let state = match &replies[0] {
            Value::Array(reply) => parse_state(reply)?,
            _ => return Err(bad("state")),
        };
        let mut top = Vec::with_capacity(top_spans.len());
        for pair in replies[1..1 + 2 * top_spans.len()].chunks(2) {
            let scored = |v: &Value| -> Result<Scored, LimiterError> {
                redis::from_redis_value_ref(v).map_err(|_| bad("top callers"))
            };
            top.push((
                most(scored(&pair[0])?, top_limit),
                most(scored(&pair[1])?, top_limit),
            ));
        }
        let strings = |v: &Value| -> Result<Vec<Vec<u8>>, LimiterError> {
            let all: Vec<Option<Vec<u8>>> =
                redis::from_redis_value_ref(v).map_err(|_| bad("usage"))?;
            Ok(all.into_iter().map(Option::unwrap_or_default).collect())
        };
        let minutes = strings(&replies[expected - 2])?;
        let hours = strings(&replies[expected - 1])?;
        // The hour's two strings are the day's last two.
        let hour_from = minutes
            .len()
            .saturating_sub(UsageSpan::HOUR.strings(now_minute).len());
        Ok(PolicyLive {
            state,
            hour: UsageSpan::HOUR.points_from(now_minute, &minutes[hour_from..]),
            day: UsageSpan::DAY.points_from(now_minute, &minutes),
            week: UsageSpan::WEEK.points_from(now_minute, &hours),
            top,
            lookup,
        })
    }
}
