//! No policy, an incomplete one, or an unknown algorithm: an empty reply or index 0.

use super::{FOREVER, Policy, RATE, State};
use crate::lua::scripts::*;

#[tokio::test]
async fn lua_state_missing_policy_is_an_empty_reply() {
    for algo in Algo::ALL {
        let p = Policy::unconfigured(algo, FOREVER).await;
        assert_eq!(p.state_without_writes("missing").await, None, "{algo:?}");
        assert!(p.state_by_sha().await.is_empty(), "{algo:?}");

        // State left behind without a configuration is no policy either.
        p.hset(&p.key, "tat", "1".into()).await;
        p.hset(&p.key, "algorithm", algo.name().into()).await;
        assert_eq!(p.state_without_writes("no max_permits").await, None);

        // Nor is a policy lacking what its algorithm needs (the acquire scripts answer
        // "no such policy" to it too).
        p.hset(&p.key, "max_permits", "5".into()).await;
        assert_eq!(
            p.state_without_writes("no rate / window / ttl").await,
            None,
            "{algo:?}"
        );
        p.delete().await;
    }
}

#[tokio::test]
async fn lua_state_unknown_algorithm_is_index_zero() {
    let p = Policy::new(TokenBucket, 5).await;
    p.hset(&p.key, "algorithm", "leaky_bucket".into()).await;
    let s = p.state_without_writes("unknown algorithm").await.unwrap();
    assert_eq!(
        s,
        State {
            current: "5".into(),
            max: 5,
            rate: RATE.into(),
            version: 1,
            updated_ms: 0,
            full_in_ms: 0,
            index: 0,
        }
    );
    p.delete().await;
}
