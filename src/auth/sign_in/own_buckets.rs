//! ratekeeper's own limits on sign-in attempts, in Redis: token buckets decided by the
//! same keyed script as any per-key policy's bucket, with their limits passed in each
//! call, so that nothing needs configuring first. A bucket expires by itself once idle
//! long enough to be full again, so nothing needs cleaning up.

use std::sync::LazyLock;

use ratekeeper_limiter::{
    AcquireOutcome, BucketLimits, Decision, KeyedBucket, Limiter, LimiterError, PolicyConfig,
};

use crate::domain::{Algorithm, AppSlug, Mode, PolicyName, Scope};

/// The one application allowed on an own bucket.
const OWN_APP: &str = "ratekeeper";

/// The pseudo-policy whose per-key buckets are ratekeeper's own (no stored policy has
/// its configuration: it lives here only).
static OWN_POLICY: LazyLock<PolicyConfig> = LazyLock::new(|| PolicyConfig {
    name: PolicyName::parse("ratekeeper.own").expect("a valid policy name"),
    created_ms: 0,
    version: 1,
    algorithm: Algorithm::TokenBucket,
    max_permits: 1,
    rate: 1.0,
    window_ms: None,
    lease_ttl_ms: None,
    apps: format!(",{OWN_APP},"),
    enabled: true,
    scope: Scope::PerKey,
    mode: Mode::Enforce,
});

static OWN_SLUG: LazyLock<AppSlug> =
    LazyLock::new(|| AppSlug::parse(OWN_APP).expect("a valid slug"));

#[derive(Debug, Clone, Copy)]
pub struct OwnBucket {
    /// The burst allowed.
    pub max_permits: i64,
    /// Permits per second coming back.
    pub rate: f64,
}

fn keyed<'a>(name: &'a str, bucket: OwnBucket) -> KeyedBucket<'a> {
    KeyedBucket {
        policy: &OWN_POLICY,
        caller: name,
        limits: BucketLimits {
            max_permits: bucket.max_permits,
            rate: bucket.rate,
            window_ms: None,
            lease_ttl_ms: None,
        },
    }
}

/// Takes one permit from own bucket `name`: `None` when granted, else the ms to wait.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn take_own_permit(
    limiter: &Limiter,
    name: &str,
    bucket: OwnBucket,
) -> Result<Option<i64>, LimiterError> {
    let one = crate::domain::Permits::parse(1).expect("1 is a permit count");
    let outcome = limiter
        .acquire_keyed_unbatched(&keyed(name, bucket), one, &OWN_SLUG)
        .await?;
    match outcome {
        AcquireOutcome::Decided(d) if d.decision == Decision::Granted => Ok(None),
        AcquireOutcome::Decided(d) if d.decision == Decision::Denied => {
            Ok(Some(d.retry_after_ms.max(1)))
        }
        other => Err(LimiterError::Reply(format!("own bucket {name}: {other:?}"))),
    }
}

/// Forgets own bucket `name` (it starts full next time), e.g. after a good sign-in.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn forget_own_bucket(limiter: &Limiter, name: &str) -> Result<(), LimiterError> {
    // A bucket's key does not depend on its limits.
    let any = OwnBucket {
        max_permits: 1,
        rate: 1.0,
    };
    limiter.reset_keyed(&keyed(name, any)).await.map(|_| ())
}
