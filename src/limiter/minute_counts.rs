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

    /// The counts of the `minutes` minutes up to and including `now_minute`, oldest first.
    pub async fn recent_minute_counts(
        &self,
        policy: &str,
        now_minute: i64,
        minutes: i64,
    ) -> Result<Vec<MinuteCounts>, LimiterError> {
        let first = now_minute - minutes + 1;
        let mut pipe = redis::pipe();
        for minute in first..=now_minute {
            pipe.cmd("HMGET")
                .arg(self.keys.minute_counts(policy, minute))
                .arg("granted")
                .arg("denied");
        }
        let mut conn = self.conn.clone();
        let replies: Vec<(Option<u64>, Option<u64>)> =
            self.timed(pipe.query_async(&mut conn)).await?;
        Ok((first..=now_minute)
            .zip(replies)
            .map(|(minute, (granted, denied))| MinuteCounts {
                minute,
                granted: granted.unwrap_or(0),
                denied: denied.unwrap_or(0),
            })
            .collect())
    }
}
