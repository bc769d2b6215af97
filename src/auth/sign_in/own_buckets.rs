//! ratekeeper's own limits on sign-in attempts, in Redis: token buckets run by the same
//! script as any policy's. They are configured on first use and expire once idle long
//! enough to be full again, so nothing needs cleaning up.

use ratekeeper_limiter::{Code, Limiter, LimiterError, scripts};

/// The one application allowed on an own bucket.
const OWN_APP: &str = "ratekeeper";

#[derive(Debug, Clone, Copy)]
pub struct OwnBucket {
    /// The burst allowed.
    pub max_permits: i64,
    /// Permits per second coming back.
    pub rate: f64,
}

/// Takes one permit from own bucket `name`: `None` when granted, else the ms to wait.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn take_own_permit(
    limiter: &Limiter,
    name: &str,
    bucket: OwnBucket,
) -> Result<Option<i64>, LimiterError> {
    let key = limiter.keys().own_bucket(name);
    let mut conn = limiter.connection();
    let mut configure = scripts::SYNC_POLICY.key(&key);
    configure
        .arg(1)
        .arg(1)
        .arg(bucket.max_permits)
        .arg(bucket.rate.to_string())
        .arg(format!(",{OWN_APP},"))
        .arg("1");
    limiter
        .call(configure.invoke_async::<i64>(&mut conn))
        .await?;

    let mut take = scripts::TOKEN_BUCKET.key(&key);
    take.arg(1).arg(OWN_APP);
    let reply: Vec<i64> = limiter.call(take.invoke_async(&mut conn)).await?;

    // Idle this long, the bucket would be full again: forgetting it changes nothing.
    let full_after_ms = (bucket.max_permits as f64 * 1000.0 / bucket.rate).ceil() as i64;
    limiter
        .call(
            redis::cmd("PEXPIRE")
                .arg(&key)
                .arg(full_after_ms + 1000)
                .query_async::<i64>(&mut conn),
        )
        .await?;

    match reply.as_slice() {
        [code, _, retry_after_ms, ..] if Code::of(*code) == Some(Code::Denied) => {
            Ok(Some(*retry_after_ms))
        }
        [code, ..] if Code::of(*code) == Some(Code::Granted) => Ok(None),
        other => Err(LimiterError::Reply(format!("own bucket {name}: {other:?}"))),
    }
}

/// Forgets own bucket `name` (it starts full next time), e.g. after a good sign-in.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn forget_own_bucket(limiter: &Limiter, name: &str) -> Result<(), LimiterError> {
    let mut conn = limiter.connection();
    limiter
        .call(
            redis::cmd("DEL")
                .arg(limiter.keys().own_bucket(name))
                .query_async::<i64>(&mut conn),
        )
        .await
        .map(|_| ())
}
