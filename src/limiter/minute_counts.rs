//! Granted and denied counts per policy and minute, summed over every instance: each
//! instance adds what it decided (see `crate::acquire::DecisionCounts`), the console reads them back.
//! One small hash per policy and minute, expiring after an hour.

use super::{Limiter, LimiterError};

/// How long a minute's counts are kept.
const KEEP_MS: i64 = 60 * 60 * 1000;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MinuteCounts {
    /// Unix minute (ms / 60,000).
    pub minute: i64,
    pub granted: u64,
    pub denied: u64,
}

impl Limiter {
    /// Adds one instance's counts of `minute`, for many policies in one pipeline.
    #[tracing::instrument(level = "debug", skip_all, fields(minute = minute, policies = counts.len()))]
    pub async fn add_minute_counts(
        &self,
        minute: i64,
        counts: &[(String, u64, u64)],
    ) -> Result<(), LimiterError> {
        if counts.is_empty() {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for (policy, granted, denied) in counts {
            let key = self.keys.minute_counts(policy, minute);
            pipe.hincr(&key, "granted", *granted)
                .ignore()
                .hincr(&key, "denied", *denied)
                .ignore()
                .pexpire(&key, KEEP_MS)
                .ignore();
        }
        let mut conn = self.conn.clone();
        self.timed(pipe.query_async::<()>(&mut conn)).await
    }
}
