//! The counts every instance merges into Redis (the flusher's writes) and the console
//! reads back: granted and denied per policy and minute, and the top callers.

pub(crate) mod episodes;
pub(crate) mod flush;
pub(crate) mod top_keys;
pub(crate) mod usage;

pub use episodes::{Denied, EpisodeChange, Nearness, Transition};
pub use flush::{AppFlush, PolicyFlush};
pub use top_keys::{CallerCount, TopBatch, TopByOutcome};
pub use usage::{MinuteCounts, UsageSpan};
