//! The decision side of ratekeeper: the domain types a decision needs, the Lua scripts
//! that take each decision inside Redis, the Redis connection (one node or a cluster),
//! the batcher that every acquire goes through, and the reads and writes of Redis state
//! that the server's console, sync and flusher make. Nothing here knows about SQL or HTTP:
//! the server (the workspace's root package) brings those.
#![forbid(unsafe_code)]

pub mod domain;

pub mod client;
pub mod counts;
pub mod decide;
pub mod sync_writes;
pub mod views;

mod policy_config;

pub use client::{KeySpace, Limiter, LimiterError, RedisConn, StateKey, functions, scripts};
pub use counts::{
    AppFlush, CallerCount, Denied, EpisodeChange, MinuteCounts, Nearness, PolicyFlush, TopBatch,
    TopByOutcome, Transition, UsageSpan,
};
pub use decide::reply::Code;
pub use decide::{
    AcquireCall, AcquireOutcome, AllAsk, AllTarget, BatchFigures, Batcher, BucketLimits, Decided,
    Decision, KeyedBucket, LeaseId, RefundOutcome, ReleaseOutcome,
};
pub use policy_config::PolicyConfig;
pub use sync_writes::listen_for_changes;
pub use views::{BucketState, LiveView, PolicyLive, StateRead, StoredBucket};
