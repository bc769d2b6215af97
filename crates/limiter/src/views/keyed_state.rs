//! One caller's bucket of a keyed policy as it stands: its acquire script, told to write
//! nothing, reads it.

use crate::client::{Limiter, LimiterError, scripts};
use crate::decide::call::AcquireCall;
use crate::decide::keyed::KeyedBucket;
use crate::decide::reply::Code;
use crate::domain::AppSlug;

impl Limiter {
    /// A caller's bucket as it stands, without changing it (the scripts read only when
    /// told the policy is disabled): `(permits available now, ms until full)`.
    pub async fn keyed_state(&self, bucket: &KeyedBucket<'_>) -> Result<(i64, i64), LimiterError> {
        let (_, invocation) = self.keyed_state_invocation(bucket);
        let mut conn = self.conn.clone();
        let reply: Vec<i64> = self.timed(invocation.invoke_async(&mut conn)).await?;
        keyed_state_of(&reply)
    }

    /// The call that reads a caller's bucket (its acquire script, told the policy is
    /// disabled, decides nothing), with its script: to run alone or in a pipeline.
    pub(crate) fn keyed_state_invocation(
        &self,
        bucket: &KeyedBucket<'_>,
    ) -> (
        &'static scripts::LuaScript,
        redis::ScriptInvocation<'static>,
    ) {
        let app = AppSlug::parse("ratekeeper").expect("a valid slug");
        let call = AcquireCall::keyed_read(self, bucket, &app);
        (call.script(), call.alone())
    }
}

/// A keyed state read's reply: `(permits available now, ms until full)`.
pub(crate) fn keyed_state_of(reply: &[i64]) -> Result<(i64, i64), LimiterError> {
    match reply {
        [code, remaining, _, reset, ..] if Code::of(*code) == Some(Code::Unenforced) => {
            Ok((*remaining, *reset))
        }
        _ => Err(LimiterError::Reply(format!("{reply:?}"))),
    }
}
