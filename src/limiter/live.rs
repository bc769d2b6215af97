//! The live view of many policies at once, for the console: each one's state (as the
//! state script reports it) and its granted/denied counts of the last minutes. A page of
//! 200 policies is one pipeline on a single node; on a Redis Cluster, where a pipeline
//! must stay in one slot, one pipeline per policy, all in flight together.

use futures_util::future::join_all;
use redis::Value;

use crate::domain::PolicyName;

use super::state::parse_state;
use super::{BucketState, Limiter, LimiterError, MinuteCounts, scripts};

/// One policy as Redis holds it now.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveView {
    /// `None` when Redis does not hold the policy (the next sync pass restores it).
    pub state: Option<BucketState>,
    /// The counts of each minute asked for, oldest first.
    pub minutes: Vec<MinuteCounts>,
}

impl Limiter {
    /// The live view of each policy of `names`, with the counts of the `minutes` minutes
    /// up to and including `now_minute`. One entry per name, in order; an entry is an
    /// error when Redis answered that policy's part with one.
    #[tracing::instrument(level = "debug", skip_all, fields(policies = names.len()))]
    pub async fn live_views(
        &self,
        names: &[PolicyName],
        now_minute: i64,
        minutes: i64,
    ) -> Result<Vec<Result<LiveView, LimiterError>>, LimiterError> {
        let first = now_minute - minutes + 1;
        if self.conn.is_cluster() {
            let one = |name| self.query_live(std::slice::from_ref(name), first, now_minute);
            let replies = join_all(names.iter().map(one)).await;
            let mut views = Vec::with_capacity(names.len());
            for reply in replies {
                views.extend(reply?);
            }
            return Ok(views);
        }
        self.query_live(names, first, now_minute).await
    }

    /// One pipeline: the state script (loaded first, so a flushed script cache is no
    /// error), then per policy its state and one HMGET per minute.
    async fn query_live(
        &self,
        names: &[PolicyName],
        first: i64,
        last: i64,
    ) -> Result<Vec<Result<LiveView, LimiterError>>, LimiterError> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.load_script(&scripts::POLICY_STATE).ignore();
        for name in names {
            pipe.invoke_script(&self.state_invocation(name));
            for minute in first..=last {
                pipe.cmd("HMGET")
                    .arg(self.keys.minute_counts(name.as_str(), minute))
                    .arg("granted")
                    .arg("denied");
            }
        }
        let mut conn = self.conn.clone();
        let replies: Vec<Value> = self.timed(pipe.query_async(&mut conn)).await?;
        let per_policy = 1 + (last - first + 1) as usize;
        if replies.len() != names.len() * per_policy {
            return Err(LimiterError::Reply(format!(
                "{} replies for {} policies",
                replies.len(),
                names.len()
            )));
        }
        Ok(replies
            .chunks(per_policy)
            .map(|chunk| live_view(chunk, first))
            .collect())
    }
}

fn live_view(chunk: &[Value], first: i64) -> Result<LiveView, LimiterError> {
    let (state, counts) = chunk.split_first().expect("chunks are never empty");
    let state = match state {
        Value::Array(reply) => parse_state(reply)?,
        other => return Err(LimiterError::Reply(format!("{other:?}"))),
    };
    let minutes = counts
        .iter()
        .zip(first..)
        .map(|(reply, minute)| {
            let (granted, denied): (Option<u64>, Option<u64>) = redis::from_redis_value_ref(reply)
                .map_err(|_| LimiterError::Reply(format!("{reply:?}")))?;
            Ok(MinuteCounts {
                minute,
                granted: granted.unwrap_or(0),
                denied: denied.unwrap_or(0),
            })
        })
        .collect::<Result<_, LimiterError>>()?;
    Ok(LiveView { state, minutes })
}
