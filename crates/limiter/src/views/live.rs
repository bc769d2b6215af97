//! The live view of many policies at once, for the console's tables: each one's state (as
//! `lib/policy_state.lua` reports it) and its granted/denied counts of the last minutes.
//! One call of `lua/policies_live.lua` for a whole page on a single node (one command,
//! whatever the number of policies); on a Redis Cluster, where a script must stay in one
//! slot, one call per policy, all in flight together.

use futures_util::future::join_all;
use redis::Value;

use crate::domain::PolicyName;

use crate::client::{Limiter, LimiterError, scripts};
use crate::counts::usage::MinuteCounts;
use crate::counts::usage::{byte_ranges, pairs, u32_at};
use crate::views::state::BucketState;
use crate::views::state::parse_packed_state;

/// How the live read finds a policy's state, from what the database holds of it: the
/// script reads the policy's hash only where it must.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StateRead {
    /// No state: a keyed policy's callers each have a bucket of their own (or the caller
    /// wants the counts alone).
    Skip,
    /// A global token bucket's configuration: its state key alone is read when this
    /// configuration (version and incarnation) last decided on it, as an acquire that
    /// passes it does (`lua/lib/token_bucket_global.lua`); else the hash.
    TokenBucket(StoredBucket),
    /// Any other policy: its hash holds what its state needs.
    FromHash,
}

/// A global token bucket as the database holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoredBucket {
    pub max_permits: i64,
    pub rate: f64,
    pub version: i64,
    pub created_ms: i64,
}

/// One policy as Redis holds it now.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveView {
    /// `None` when Redis does not hold the policy (the next sync pass restores it).
    pub state: Option<BucketState>,
    /// The counts of each minute asked for, oldest first.
    pub minutes: Vec<MinuteCounts>,
}

impl Limiter {
    /// The live view of each policy of `names` (with how its state is read), with the
    /// counts of the `minutes` minutes (1 to 60) up to and including `now_minute`. One
    /// entry per name, in order; an entry is an error when Redis answered that policy's
    /// part with one.
    #[tracing::instrument(level = "debug", skip_all, fields(policies = names.len()))]
    pub async fn live_views(
        &self,
        names: &[(PolicyName, StateRead)],
        now_minute: i64,
        minutes: i64,
    ) -> Result<Vec<Result<LiveView, LimiterError>>, LimiterError> {
        let minutes = minutes.clamp(1, 60);
        let first = now_minute - minutes + 1;
        if names.is_empty() {
            return Ok(Vec::new());
        }
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

    /// One call of the live script for `names`.
    async fn query_live(
        &self,
        names: &[(PolicyName, StateRead)],
        first: i64,
        last: i64,
    ) -> Result<Vec<Result<LiveView, LimiterError>>, LimiterError> {
        let hour = last.div_euclid(60);
        let [previous, this] = byte_ranges(first, last);
        // The previous hour's strings are named only when the minutes begin in it.
        let hours: &[i64] = if previous.1 >= previous.0 {
            &[hour, hour - 1]
        } else {
            &[hour]
        };
        let mut invocation = scripts::POLICIES_LIVE.prepare_invoke();
        for (name, _) in names {
            invocation.key(self.keys.policy(name));
            for key in self.keys.all_state(name) {
                invocation.key(key);
            }
            for &hour in hours {
                invocation
                    .key(self.keys.usage_minutes(name.as_str(), hour))
                    .key(self.keys.usage_shadow_minutes(name.as_str(), hour))
                    .key(self.keys.usage_unavailable_minutes(name.as_str(), hour));
            }
        }
        invocation.arg(this.0).arg(this.1);
        if hours.len() == 2 {
            invocation.arg(previous.0).arg(previous.1);
        } else {
            invocation.arg("").arg("");
        }
        let mut digits = itoa::Buffer::new();
        for (_, read) in names {
            match read {
                StateRead::Skip => invocation.arg("k").arg("").arg("").arg(""),
                StateRead::FromHash => invocation.arg("-").arg("").arg("").arg(""),
                StateRead::TokenBucket(bucket) => invocation
                    .arg(digits.format(bucket.max_permits))
                    .arg(bucket.rate.to_string())
                    .arg(digits.format(bucket.version))
                    .arg(digits.format(bucket.created_ms)),
            };
        }
        let mut conn = self.conn.clone();
        let replies: Vec<Value> = self.timed(invocation.invoke_async(&mut conn)).await?;
        if replies.len() != names.len() * REPLIES_PER_POLICY {
            return Err(LimiterError::Reply(format!(
                "{} replies for {} policies",
                replies.len(),
                names.len()
            )));
        }
        Ok(replies
            .chunks(REPLIES_PER_POLICY)
            .map(|chunk| live_view(chunk, first, last))
            .collect())
    }
}

/// The script's replies for one policy: its state (packed), then its usage, shadow and
/// refusal minutes.
const REPLIES_PER_POLICY: usize = 4;

fn live_view(chunk: &[Value], first: i64, last: i64) -> Result<LiveView, LimiterError> {
    let bytes = |v: &Value| -> Result<Vec<u8>, LimiterError> {
        redis::from_redis_value_ref(v).map_err(|_| LimiterError::Reply(format!("{v:?}")))
    };
    let [state, usage, shadow, unavailable] = chunk else {
        return Err(LimiterError::Reply(format!("{chunk:?}")));
    };
    let state = parse_packed_state(&bytes(state)?)?;
    let (usage, shadow, unavailable) = (bytes(usage)?, bytes(shadow)?, bytes(unavailable)?);
    let count = (last - first + 1) as usize;
    let minutes = pairs(&usage, count)
        .enumerate()
        .zip(first..)
        .map(|((i, (granted, denied)), minute)| MinuteCounts {
            minute,
            granted,
            denied,
            shadow_denied: u32_at(&shadow, i),
            unavailable: u32_at(&unavailable, i),
            ..MinuteCounts::default()
        })
        .collect();
    Ok(LiveView { state, minutes })
}
