//! Everything a policy's page shows from Redis, in one pipeline (one round trip; one slot on
//! a cluster, as every key read carries the policy's hash tag): its state, its usage over
//! the last hour, day and week, and its top callers over each span asked for.

use redis::Value;

use crate::domain::PolicyName;

use crate::client::{KeySpace, Limiter, LimiterError, scripts};
use crate::counts::top_keys::{
    Scored, TOP_READS, TopByOutcome, caller_minute_reads, caller_minutes_of, ranked,
};
use crate::counts::usage::{MinuteCounts, UsageSpan};
use crate::decide::keyed::KeyedBucket;
use crate::views::keyed_state::keyed_state_of;
use crate::views::state::BucketState;
use crate::views::state::parse_state;

/// The name of a policy's usage string of one hour or day (see `KeySpace`).
type UsageKey = fn(&KeySpace, &str, i64) -> String;

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
    /// Per span asked for: the top callers per outcome, most first.
    pub top: Vec<TopByOutcome>,
    /// The caller's bucket looked up, if one was: `(permits available, ms until full)`.
    pub lookup: Option<(i64, i64)>,
    /// The looked-up caller's counts in each of the last 60 minutes, oldest first, from the
    /// top callers (exact while the policy has no more than their `KEEP` callers a minute).
    pub caller_hour: Option<Vec<MinuteCounts>>,
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
                self.one_pipeline(
                    name,
                    now_minute,
                    top_spans,
                    top_limit,
                    None,
                    Some(bucket.caller),
                ),
                self.keyed_state(bucket),
            )
            .await;
            let mut live = live?;
            live.lookup = Some(state?);
            return Ok(live);
        }
        let caller = lookup.map(|b| b.caller);
        self.one_pipeline(name, now_minute, top_spans, top_limit, lookup, caller)
            .await
    }

    async fn one_pipeline(
        &self,
        name: &PolicyName,
        now_minute: i64,
        top_spans: &[i64],
        top_limit: usize,
        lookup: Option<&KeyedBucket<'_>>,
        caller: Option<&str>,
    ) -> Result<PolicyLive, LimiterError> {
        let policy = name.as_str();
        let caller_first = now_minute - 59;
        let minute_strings = UsageSpan::DAY.strings(now_minute);
        let hour_strings = UsageSpan::WEEK.strings(now_minute);
        let mut pipe = redis::pipe();
        // Loaded first, so a flushed script cache is no error.
        pipe.load_script(&scripts::POLICY_STATE).ignore();
        pipe.invoke_script(&self.state_invocation(name));
        for &minutes in top_spans {
            self.queue_top(&mut pipe, policy, now_minute, minutes);
        }
        // The usage strings, then the shadow ones: each a minute string per hour of the
        // day, and an hour string per day of the week.
        let usage: [(&[i64], UsageKey); 6] = [
            (&minute_strings, KeySpace::usage_minutes),
            (&hour_strings, KeySpace::usage_hours),
            (&minute_strings, KeySpace::usage_shadow_minutes),
            (&hour_strings, KeySpace::usage_shadow_hours),
            (&minute_strings, KeySpace::usage_unavailable_minutes),
            (&hour_strings, KeySpace::usage_unavailable_hours),
        ];
        for (spans, key_of) in usage {
            let keys: Vec<String> = spans
                .iter()
                .map(|&s| key_of(&self.keys, policy, s))
                .collect();
            pipe.cmd("MGET").arg(keys);
        }
        if let Some(caller) = caller {
            self.queue_caller_minutes(&mut pipe, policy, caller, caller_first, now_minute);
        }
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
        let caller_hour = match caller {
            Some(_) => {
                let reads = caller_minute_reads(caller_first, now_minute);
                let split = replies.len().saturating_sub(reads);
                let scores: Vec<Option<f64>> = replies
                    .split_off(split)
                    .iter()
                    .map(|v| redis::from_redis_value_ref(v).ok().flatten())
                    .collect();
                Some(caller_minutes_of(&scores, caller_first, now_minute))
            }
            None => None,
        };
        let bad = |what: &str| LimiterError::Reply(format!("{what}: {replies:?}"));
        let expected = 1 + TOP_READS * top_spans.len() + 6;
        if replies.len() != expected {
            return Err(bad("reply count"));
        }
        let state = match &replies[0] {
            Value::Array(reply) => parse_state(reply)?,
            _ => return Err(bad("state")),
        };
        let mut top = Vec::with_capacity(top_spans.len());
        for reads in replies[1..1 + TOP_READS * top_spans.len()].chunks(TOP_READS) {
            let scored = |v: &Value| -> Result<Scored, LimiterError> {
                redis::from_redis_value_ref(v).map_err(|_| bad("top callers"))
            };
            top.push(ranked(
                [scored(&reads[0])?, scored(&reads[1])?, scored(&reads[2])?],
                top_limit,
            ));
        }
        let strings = |v: &Value| -> Result<Vec<Vec<u8>>, LimiterError> {
            let all: Vec<Option<Vec<u8>>> =
                redis::from_redis_value_ref(v).map_err(|_| bad("usage"))?;
            Ok(all.into_iter().map(Option::unwrap_or_default).collect())
        };
        let minutes = strings(&replies[expected - 6])?;
        let hours = strings(&replies[expected - 5])?;
        let shadow_minutes = strings(&replies[expected - 4])?;
        let shadow_hours = strings(&replies[expected - 3])?;
        let unavailable_minutes = strings(&replies[expected - 2])?;
        let unavailable_hours = strings(&replies[expected - 1])?;
        // The hour's two strings are the day's last two.
        let hour_from = minutes
            .len()
            .saturating_sub(UsageSpan::HOUR.strings(now_minute).len());
        Ok(PolicyLive {
            state,
            hour: UsageSpan::HOUR.points_from(
                now_minute,
                &minutes[hour_from..],
                &shadow_minutes[hour_from..],
                &unavailable_minutes[hour_from..],
            ),
            day: UsageSpan::DAY.points_from(
                now_minute,
                &minutes,
                &shadow_minutes,
                &unavailable_minutes,
            ),
            week: UsageSpan::WEEK.points_from(
                now_minute,
                &hours,
                &shadow_hours,
                &unavailable_hours,
            ),
            top,
            lookup,
            caller_hour,
        })
    }
}
