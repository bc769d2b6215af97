//! Refunds: permits a grant took but the work did not use, given back to the bucket they
//! came from (a job of the batcher's queue, `ratekeeper_limiter::decide::give_back`). The
//! same checks as an acquire's before Redis (API key, allowed app, key on a per_key
//! policy); a concurrency policy's leases are released, not refunded. Refunds are not
//! counted in a policy's decision counts (they decide nothing), and they end the caller's
//! remembered denial of the policy.

use ratekeeper_limiter::{KeyedBucket, LimiterError, RefundOutcome};

use super::acquirer::{Acquirer, fallback};
use super::caller::{Partition, partition_of};
use super::outcome::{Acquired, Outcome, Refusal};
use crate::domain::{Algorithm, AppSlug, CallerKey, Permits, PolicyName};
use crate::snapshot::PolicyEntry;

impl Acquirer {
    /// Gives `permits` back to `app`'s bucket of policy `name` (the bucket of `key`, for a
    /// per_key policy): the reply tells the bucket after it. With Redis away, the policy's
    /// failure mode answers as for an acquire (fail-open: a degraded 200, nothing given).
    pub async fn refund(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
        key: Option<CallerKey>,
    ) -> Result<Acquired, Refusal> {
        let policy = self.snapshot.policy(name.as_str());
        let partition = partition_of(policy.as_deref(), app, key)?;
        if let Some(policy) = policy.as_deref() {
            if policy.algorithm() == Algorithm::Concurrency {
                return Err(Refusal::NotRefundable);
            }
            if partition.is_some() && !policy.allows(app) {
                return Err(Refusal::AppNotAllowed);
            }
        }
        let answer = self
            .give_back(app, name, permits, policy.as_deref(), partition.as_ref())
            .await;
        let caller = partition.as_ref().map_or(app.as_str(), Partition::as_str);
        self.denials.forget_caller(name.as_str(), caller);
        let outcome = match answer {
            Ok(RefundOutcome::Refunded(decided)) => Outcome::Decided(decided),
            Ok(RefundOutcome::NoSuchPolicy) => return Err(Refusal::NoSuchPolicy),
            Ok(RefundOutcome::AppNotAllowed) => return Err(Refusal::AppNotAllowed),
            Ok(RefundOutcome::Leased) => return Err(Refusal::NotRefundable),
            Err(e) => {
                self.log_outage(name, &e);
                fallback(app, policy.as_deref())?
            }
        };
        Ok(Acquired { outcome, partition })
    }

    /// The refund in Redis, putting a policy Redis lost back first (then there is nothing
    /// to give back to: it starts full).
    async fn give_back(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
        policy: Option<&PolicyEntry>,
        partition: Option<&Partition>,
    ) -> Result<RefundOutcome, LimiterError> {
        if let (Some(partition), Some(policy)) = (partition, policy) {
            let bucket = KeyedBucket {
                policy: &policy.config,
                caller: partition.as_str(),
                limits: policy.limits_for(partition.as_str()),
            };
            return self.batcher.refund_keyed(&bucket, permits, app).await;
        }
        let algorithm = policy.map_or(Algorithm::TokenBucket, PolicyEntry::algorithm);
        let config = policy.map(|policy| &*policy.config);
        let answer = self
            .batcher
            .refund(name, algorithm, permits, app, config)
            .await?;
        match (answer, policy) {
            (RefundOutcome::NoSuchPolicy, Some(policy)) => {
                tracing::warn!(policy = %name, "redis had lost the policy; restoring it");
                self.batcher.restore(&policy.config).await?;
                self.batcher
                    .refund(name, policy.algorithm(), permits, app, config)
                    .await
            }
            (answer, _) => Ok(answer),
        }
    }
}
