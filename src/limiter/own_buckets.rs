//! ratekeeper's own limits (sign-in attempts), run by the same token-bucket script as any
//! policy. Their buckets are configured on first use and expire once idle long enough to
//! be full again, so nothing needs cleaning up.

use crate::domain::Algorithm;

use super::{AcquireOutcome, Decision, Limiter, LimiterError, acquire::parse_reply, scripts};

/// The one application allowed on an own bucket.
const OWN_APP: &str = "ratekeeper";

#[derive(Debug, Clone, Copy)]
pub struct OwnBucket {
    /// The burst allowed.
    pub max_permits: i64,
    /// Permits per second coming back.
    pub rate: f64,
}

impl Limiter {
    /// Takes one permit from own bucket `name`: `None` when granted, else the ms to wait.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn take_own_permit(
        &self,
        name: &str,
        bucket: OwnBucket,
    ) -> Result<Option<i64>, LimiterError> {
        let key = self.keys.own_bucket(name);
        let mut conn = self.conn.clone();
        let mut configure = scripts::SYNC_POLICY.key(&key);
        configure
            .arg(1)
            .arg(1)
            .arg(bucket.max_permits)
            .arg(bucket.rate.to_string())
            .arg(format!(",{OWN_APP},"))
            .arg("1");
        self.timed(configure.invoke_async::<i64>(&mut conn)).await?;

        let mut take = scripts::TOKEN_BUCKET.key(&key);
        take.arg(1).arg(OWN_APP);
        let reply: Vec<i64> = self.timed(take.invoke_async(&mut conn)).await?;

        // Idle this long, the bucket would be full again: forgetting it changes nothing.
        let full_after_ms = (bucket.max_permits as f64 * 1000.0 / bucket.rate).ceil() as i64;
        self.timed(
            redis::cmd("PEXPIRE")
                .arg(&key)
                .arg(full_after_ms + 1000)
                .query_async::<i64>(&mut conn),
        )
        .await?;

        match parse_reply(&reply, None, Algorithm::TokenBucket)? {
            AcquireOutcome::Decided {
                decision: Decision::Denied,
                retry_after_ms,
                ..
            } => Ok(Some(retry_after_ms)),
            AcquireOutcome::Decided { .. } => Ok(None),
            other => Err(LimiterError::Reply(format!("own bucket {name}: {other:?}"))),
        }
    }

    /// Forgets own bucket `name` (it starts full next time), e.g. after a good sign-in.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn forget_own_bucket(&self, name: &str) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        self.timed(
            redis::cmd("DEL")
                .arg(self.keys.own_bucket(name))
                .query_async::<i64>(&mut conn),
        )
        .await
        .map(|_| ())
    }
}
