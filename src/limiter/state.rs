//! Reading a bucket's live state, for the admin API and the console.

use serde::Serialize;

use crate::domain::PolicyName;

use super::{Limiter, LimiterError, scripts};

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BucketState {
    /// Permits available now, refilled to this moment (fractional).
    pub current_permits: f64,
    pub max_permits: i64,
    pub rate: f64,
    pub version: i64,
    /// When the bucket last granted (Unix ms); 0 if it never has.
    pub updated_ms: i64,
}

impl Limiter {
    /// `None` when the policy is not (yet) in Redis.
    pub async fn bucket_state(
        &self,
        name: &PolicyName,
    ) -> Result<Option<BucketState>, LimiterError> {
        let mut conn = self.conn.clone();
        let invocation = scripts::BUCKET_STATE.key(self.keys.policy(name));
        let reply: Vec<redis::Value> = self.timed(invocation.invoke_async(&mut conn)).await?;
        if reply.is_empty() {
            return Ok(None);
        }
        let bad = || LimiterError::Reply(format!("{reply:?}"));
        let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).ok();
        let int = |v: &redis::Value| redis::from_redis_value_ref::<i64>(v).ok();
        let [current, max, rate, version, updated] = reply.as_slice() else {
            return Err(bad());
        };
        Ok(Some(BucketState {
            current_permits: text(current).and_then(|s| s.parse().ok()).ok_or_else(bad)?,
            max_permits: int(max).ok_or_else(bad)?,
            rate: text(rate).and_then(|s| s.parse().ok()).ok_or_else(bad)?,
            version: int(version).ok_or_else(bad)?,
            updated_ms: int(updated).ok_or_else(bad)?,
        }))
    }
}
