//! The acquire path (the data plane): what an instance keeps in memory to answer
//! `POST /v1/acquire` with one Redis round trip and no SQL.

mod decision_counts;
mod denials;

pub use decision_counts::{DecisionCounts, run_flusher, unix_minute_now};
pub use denials::{CachedDenial, DenialCache};
