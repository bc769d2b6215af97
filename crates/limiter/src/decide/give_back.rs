//! Refunds (`POST /v1/refund`): permits a grant took but the work did not use, given back
//! by `lua/give_back.lua` as a job of the batcher's queue. A bucket is refilled by at most
//! that much and never above its capacity, a window's count lowered and never below 0
//! (a sliding log loses its newest entries), GCRA's theoretical arrival time moved back
//! and never before now. Leases are not refunded: they are released.

use tokio::sync::oneshot;

use crate::client::LimiterError;
use crate::decide::batch::{ALGORITHM_RETRIES, Alone, Batcher, stopped};
use crate::decide::call::AcquireCall;
use crate::decide::decision::{AcquireOutcome, Decided, parse_reply};
use crate::decide::keyed::KeyedBucket;
use crate::decide::reply::{Code, REPLY_LEN};
use crate::domain::{Algorithm, AppSlug, Permits, PolicyName};
use crate::policy_config::PolicyConfig;

/// What a refund came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundOutcome {
    /// Given back (or, on a disabled policy, nothing to give: `Unenforced`); the numbers
    /// are the bucket's after it.
    Refunded(Decided),
    NoSuchPolicy,
    AppNotAllowed,
    /// A concurrency policy: its leases are released, not refunded.
    Leased,
}

impl Batcher {
    /// Gives `permits` back to a global policy's bucket, as `app` (which must be allowed
    /// to acquire it). `algorithm` is what this instance believes the policy uses, `config`
    /// the policy in its snapshot; Redis redirects when it uses another.
    pub async fn refund(
        &self,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: Permits,
        app: &AppSlug,
        config: Option<&PolicyConfig>,
    ) -> Result<RefundOutcome, LimiterError> {
        let mut algorithm = algorithm;
        for _ in 0..=ALGORITHM_RETRIES {
            let call =
                AcquireCall::global(&self.limiter, name, algorithm, permits.get(), app, config);
            let reply = self.give_back(call).await?;
            if reply[0] == Code::WrongAlgorithm.number() {
                algorithm = Algorithm::from_index(reply[1])
                    .ok_or_else(|| LimiterError::Reply(format!("{reply:?}")))?;
                if algorithm == Algorithm::Concurrency {
                    return Ok(RefundOutcome::Leased);
                }
                continue;
            }
            return refunded(&reply, algorithm);
        }
        Err(LimiterError::Reply(format!(
            "policy {name} changed its algorithm {ALGORITHM_RETRIES} times during one refund"
        )))
    }

    /// Gives `permits` back to one caller's bucket of a keyed policy.
    pub async fn refund_keyed(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<RefundOutcome, LimiterError> {
        if bucket.policy.algorithm == Algorithm::Concurrency {
            return Ok(RefundOutcome::Leased);
        }
        let call = AcquireCall::keyed(&self.limiter, bucket, permits.get(), app);
        let reply = self.give_back(call).await?;
        refunded(&reply, bucket.policy.algorithm)
    }

    async fn give_back(&self, call: AcquireCall) -> Result<[i64; REPLY_LEN], LimiterError> {
        let (reply, answer) = oneshot::channel();
        self.queue_alone(Alone::GiveBack(call, reply))?;
        answer.await.map_err(|_| stopped())?
    }
}

fn refunded(reply: &[i64], algorithm: Algorithm) -> Result<RefundOutcome, LimiterError> {
    match parse_reply(reply, None, algorithm)? {
        AcquireOutcome::Decided(decided) => Ok(RefundOutcome::Refunded(decided)),
        AcquireOutcome::NoSuchPolicy => Ok(RefundOutcome::NoSuchPolicy),
        AcquireOutcome::AppNotAllowed => Ok(RefundOutcome::AppNotAllowed),
        AcquireOutcome::PermitsAboveMax { .. } => {
            Err(LimiterError::Reply(format!("refund refused: {reply:?}")))
        }
    }
}
