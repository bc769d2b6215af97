//! The top callers of each policy per minute, summed over every instance: sorted sets
//! `<prefix>:top:{<policy>}:<minute>:g` (grants), `:d` (denials) and `:s` (a shadow
//! policy's would-be denials, granted), trimmed to the
//! [`KEEP`] highest after each addition (memory stays flat however many callers there
//! are) and kept an hour.

use serde::Serialize;

use crate::client::{Limiter, LimiterError};
use crate::counts::usage::MinuteCounts;

/// Callers kept per policy, minute and outcome.
pub const KEEP: isize = 64;

/// How long a minute's top callers are kept.
pub(crate) const KEEP_MS: i64 = 61 * 60 * 1000;

/// One instance's top callers of one policy over a flush: `(caller, count)` per outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopBatch<'a> {
    pub policy: &'a str,
    pub granted: &'a [(String, u64)],
    pub denied: &'a [(String, u64)],
    pub shadow_denied: &'a [(String, u64)],
}

/// The outcomes callers are ranked by, with the letter ending their keys.
const OUTCOMES: [char; 3] = ['g', 'd', 's'];

/// A policy's top callers over some minutes, per outcome, most first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopByOutcome {
    pub granted: Vec<CallerCount>,
    pub denied: Vec<CallerCount>,
    /// Granted by a shadow policy that would have denied them.
    pub shadow_denied: Vec<CallerCount>,
}

/// Callers with their summed scores, as `ZUNION ... WITHSCORES` answers.
pub(crate) type Scored = Vec<(String, f64)>;

/// A caller and how many of its acquires were granted (or denied) over the minutes asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallerCount {
    /// The key (per_key), or the application (per_app, global).
    pub key: String,
    pub count: u64,
}

impl Limiter {
    pub(crate) fn top_key(&self, policy: &str, minute: i64, outcome: char) -> String {
        format!("{}:top:{{{policy}}}:{minute}:{outcome}", self.keys.prefix())
    }

    /// The `limit` top callers of `policy` over the `minutes` minutes up to `now_minute`:
    /// per outcome, most first.
    #[tracing::instrument(level = "debug", skip_all, fields(policy = %policy, minutes))]
    pub async fn top(
        &self,
        policy: &str,
        now_minute: i64,
        minutes: i64,
        limit: usize,
    ) -> Result<TopByOutcome, LimiterError> {
        let mut pipe = redis::pipe();
        self.queue_top(&mut pipe, policy, now_minute, minutes);
        let mut conn = self.conn.clone();
        let scored: [Scored; 3] = self.timed(pipe.query_async(&mut conn)).await?;
        Ok(ranked(scored, limit))
    }

    /// Adds to `pipe` the [`TOP_READS`] reads of [`Self::top`] (granted, denied, then
    /// shadow-denied callers with their scores; [`ranked`] ranks them).
    pub(crate) fn queue_top(
        &self,
        pipe: &mut redis::Pipeline,
        policy: &str,
        now_minute: i64,
        minutes: i64,
    ) {
        for outcome in OUTCOMES {
            let keys: Vec<String> = (now_minute - minutes + 1..=now_minute)
                .map(|m| self.top_key(policy, m, outcome))
                .collect();
            pipe.cmd("ZUNION")
                .arg(keys.len())
                .arg(&keys)
                .arg("WITHSCORES");
        }
    }
}

impl Limiter {
    /// One caller's counts on each of `policies` over the `minutes` minutes up to
    /// `now_minute`, summed (`minute` is the first one's), from the top callers: exact
    /// while a policy has no more than [`KEEP`] callers a minute, never more than the
    /// truth. One pipeline of `ZSCORE`s (on a cluster, one per policy, in its slot).
    #[tracing::instrument(level = "debug", skip_all, fields(policies = policies.len(), minutes))]
    pub async fn caller_recent(
        &self,
        policies: &[&str],
        caller: &str,
        now_minute: i64,
        minutes: i64,
    ) -> Result<Vec<MinuteCounts>, LimiterError> {
        let first = now_minute - minutes.clamp(1, 60) + 1;
        if self.conn.is_cluster() {
            let each = policies
                .iter()
                .map(|p| self.read_caller(std::slice::from_ref(p), caller, first, now_minute));
            let read: Result<Vec<Vec<MinuteCounts>>, LimiterError> =
                futures_util::future::join_all(each)
                    .await
                    .into_iter()
                    .collect();
            return Ok(read?.into_iter().flatten().collect());
        }
        self.read_caller(policies, caller, first, now_minute).await
    }

    async fn read_caller(
        &self,
        policies: &[&str],
        caller: &str,
        first: i64,
        last: i64,
    ) -> Result<Vec<MinuteCounts>, LimiterError> {
        if policies.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for policy in policies {
            self.queue_caller_minutes(&mut pipe, policy, caller, first, last);
        }
        let mut conn = self.conn.clone();
        let scores: Vec<Option<f64>> = self.timed(pipe.query_async(&mut conn)).await?;
        Ok(scores
            .chunks(caller_minute_reads(first, last))
            .map(|policy| {
                let minutes = caller_minutes_of(policy, first, last);
                minutes.iter().fold(
                    MinuteCounts {
                        minute: first,
                        ..MinuteCounts::default()
                    },
                    |sum, m| MinuteCounts {
                        granted: sum.granted + m.granted,
                        denied: sum.denied + m.denied,
                        shadow_denied: sum.shadow_denied + m.shadow_denied,
                        ..sum
                    },
                )
            })
            .collect())
    }

    /// Queues the `ZSCORE`s of one caller's count of each outcome in each minute of
    /// `first..=last` on `policy` ([`caller_minute_reads`] replies).
    pub(crate) fn queue_caller_minutes(
        &self,
        pipe: &mut redis::Pipeline,
        policy: &str,
        caller: &str,
        first: i64,
        last: i64,
    ) {
        for outcome in OUTCOMES {
            for minute in first..=last {
                pipe.cmd("ZSCORE")
                    .arg(self.top_key(policy, minute, outcome))
                    .arg(caller);
            }
        }
    }
}

/// How many replies [`Limiter::queue_caller_minutes`] queues.
pub(crate) fn caller_minute_reads(first: i64, last: i64) -> usize {
    OUTCOMES.len() * (last - first + 1).max(0) as usize
}

/// The replies of [`Limiter::queue_caller_minutes`] as one count per minute, oldest first.
pub(crate) fn caller_minutes_of(
    scores: &[Option<f64>],
    first: i64,
    last: i64,
) -> Vec<MinuteCounts> {
    let per_outcome = (last - first + 1).max(0) as usize;
    let at = |outcome: usize, i: usize| {
        scores
            .get(outcome * per_outcome + i)
            .copied()
            .flatten()
            .unwrap_or(0.0) as u64
    };
    (0..per_outcome)
        .map(|i| MinuteCounts {
            minute: first + i as i64,
            granted: at(0, i),
            denied: at(1, i),
            shadow_denied: at(2, i),
            ..MinuteCounts::default()
        })
        .collect()
}

/// How many replies [`Limiter::queue_top`] queues.
pub(crate) const TOP_READS: usize = OUTCOMES.len();

/// The replies of [`Limiter::queue_top`], `limit` callers of each outcome.
pub(crate) fn ranked([granted, denied, shadow_denied]: [Scored; 3], limit: usize) -> TopByOutcome {
    TopByOutcome {
        granted: most(granted, limit),
        denied: most(denied, limit),
        shadow_denied: most(shadow_denied, limit),
    }
}

/// The `limit` callers with the highest scores, most first (ties by name).
fn most(mut all: Scored, limit: usize) -> Vec<CallerCount> {
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.into_iter()
        .take(limit)
        .map(|(key, n)| CallerCount {
            key,
            count: n as u64,
        })
        .collect()
}
