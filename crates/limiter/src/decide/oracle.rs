//! Acquires decided one at a time by their algorithm's own script, without the batcher:
//! the server's acquire path never decides this way (every acquire goes through
//! [`crate::Batcher`]; only ratekeeper's own sign-in buckets, which are rare, do); the
//! tests decide the same acquires both ways and compare, so the batch script is held to
//! what each single script answers.

use crate::client::{Limiter, LimiterError};
use crate::decide::call::AcquireCall;
use crate::decide::decision::AcquireOutcome;
use crate::decide::decision::parse_reply;
use crate::decide::keyed::KeyedBucket;
use crate::decide::reply::Code;
use crate::domain::{Algorithm, AppSlug, Permits, PolicyName};

impl Limiter {
    /// Runs the acquire script of `algorithm` on a global policy; if Redis says the policy
    /// uses another one, that one's script runs once more.
    pub async fn acquire_unbatched(
        &self,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        // No configuration passed: the policy's hash decides, as it always could.
        let call = AcquireCall::global(self, name, algorithm, permits.get(), app, None);
        let reply = self.run_alone(&call).await?;
        match reply.as_slice() {
            [code, index, ..] if *code == Code::WrongAlgorithm.number() => {
                let actual = Algorithm::from_index(*index)
                    .ok_or_else(|| LimiterError::Reply(format!("{reply:?}")))?;
                let call = AcquireCall::global(self, name, actual, permits.get(), app, None);
                let again = self.run_alone(&call).await?;
                parse_reply(&again, call.lease, actual)
            }
            _ => parse_reply(&reply, call.lease, algorithm),
        }
    }

    /// Runs the keyed acquire script of the bucket's algorithm on one caller's bucket.
    pub async fn acquire_keyed_unbatched(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        let call = AcquireCall::keyed(self, bucket, permits.get(), app);
        let reply = self.run_alone(&call).await?;
        parse_reply(&reply, call.lease, bucket.policy.algorithm)
    }

    async fn run_alone(&self, call: &AcquireCall) -> Result<Vec<i64>, LimiterError> {
        let mut conn = self.conn.clone();
        self.timed(call.alone().invoke_async(&mut conn)).await
    }
}
