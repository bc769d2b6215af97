//! Reading a policy's live state, whatever its algorithm, for the admin API and the
//! console (`lua/policy_state.lua`, which writes nothing).

use serde::Serialize;

use crate::domain::PolicyName;

use crate::client::{Limiter, LimiterError, scripts};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BucketState {
    /// Permits an acquire could take now (fractional for the token bucket and the
    /// sliding window's estimate).
    pub current_permits: f64,
    pub max_permits: i64,
    /// Permits per second; 0 for the algorithms without a rate.
    pub rate: f64,
    pub version: i64,
    /// When the state was last written by a grant (Unix ms); 0 if never (or unknown).
    pub updated_ms: i64,
    /// Milliseconds until `current_permits` is back at `max_permits` if nothing more is
    /// taken.
    pub full_in_ms: i64,
}

impl Limiter {
    /// `None` when the policy is not (yet) in Redis.
    #[tracing::instrument(level = "debug", skip_all, fields(policy = %name))]
    pub async fn bucket_state(
        &self,
        name: &PolicyName,
    ) -> Result<Option<BucketState>, LimiterError> {
        let mut conn = self.conn.clone();
        let reply: Vec<redis::Value> = self
            .timed(self.state_invocation(name).invoke_async(&mut conn))
            .await?;
        parse_state(&reply)
    }

    /// The state script's call for one policy (read-only: it takes every state key, so it
    /// reports any algorithm's state).
    pub(crate) fn state_invocation(&self, name: &PolicyName) -> redis::ScriptInvocation<'static> {
        let mut invocation = scripts::POLICY_STATE.key(self.keys.policy(name));
        for key in self.keys.all_state(name) {
            invocation.key(key);
        }
        invocation
    }
}

/// [`parse_state`] of the state joined with commas, as `lua/policies_live.lua` sends it
/// (`""`: none). Integers may come in exponent form ("1e+15").
pub(crate) fn parse_packed_state(text: &[u8]) -> Result<Option<BucketState>, LimiterError> {
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || LimiterError::Reply(String::from_utf8_lossy(text).into_owned());
    let text = std::str::from_utf8(text).map_err(|_| bad())?;
    let mut fields = text.split(',');
    let mut next = || fields.next().ok_or_else(bad);
    let float = |s: &str| s.parse::<f64>().map_err(|_| bad());
    let int = |s: &str| {
        s.parse::<i64>()
            .or_else(|_| float(s).map(|f| f as i64))
            .map_err(|_| bad())
    };
    Ok(Some(BucketState {
        current_permits: float(next()?)?,
        max_permits: int(next()?)?,
        rate: float(next()?)?,
        version: int(next()?)?,
        updated_ms: int(next()?)?,
        full_in_ms: int(next()?)?,
    }))
}

/// The state script's reply: empty when the policy is not in Redis.
pub(crate) fn parse_state(reply: &[redis::Value]) -> Result<Option<BucketState>, LimiterError> {
    if reply.is_empty() {
        return Ok(None);
    }
    let bad = || LimiterError::Reply(format!("{reply:?}"));
    let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).ok();
    let int = |v: &redis::Value| redis::from_redis_value_ref::<i64>(v).ok();
    let [current, max, rate, version, updated, full_in, _algorithm] = reply else {
        return Err(bad());
    };
    Ok(Some(BucketState {
        current_permits: text(current).and_then(|s| s.parse().ok()).ok_or_else(bad)?,
        max_permits: int(max).ok_or_else(bad)?,
        rate: text(rate).and_then(|s| s.parse().ok()).ok_or_else(bad)?,
        version: int(version).ok_or_else(bad)?,
        updated_ms: int(updated).ok_or_else(bad)?,
        full_in_ms: int(full_in).ok_or_else(bad)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_state_reads_as_the_script_wrote_it() {
        let state = parse_packed_state(b"0.5,100,0.01,3,1795850794361,1000000000000000,1")
            .unwrap()
            .unwrap();
        assert_eq!(
            state,
            BucketState {
                current_permits: 0.5,
                max_permits: 100,
                rate: 0.01,
                version: 3,
                updated_ms: 1_795_850_794_361,
                full_in_ms: 1_000_000_000_000_000,
            }
        );
        // Lua's own number formatting writes large integers in exponent form.
        let state = parse_packed_state(b"1,2,0,1,0,1e+15,1").unwrap().unwrap();
        assert_eq!(state.full_in_ms, 1_000_000_000_000_000);
        assert_eq!(parse_packed_state(b"").unwrap(), None);
        assert!(parse_packed_state(b"1,2,x,1,0,0,1").is_err());
        assert!(parse_packed_state(b"1,2").is_err());
    }
}
