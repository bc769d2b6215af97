//! The acquire path (the data plane): answering `POST /v1/acquire` with one Redis round
//! trip and no SQL, and what an instance keeps in memory for it.

mod acquirer;
mod caller;
mod decision_counts;
mod denials;
mod outcome;
mod top_keys;

pub use acquirer::Acquirer;
pub use caller::{Partition, partition_of};
pub use decision_counts::{DecisionCounts, run_flusher, unix_minute_now};
pub use denials::{CachedDenial, DenialCache};
pub use outcome::{Acquired, Decided, KeyRefused, Outcome, Refusal};
pub use top_keys::{SKETCH_SIZE, TakenTop, TopKeys, TopKeysRegistry};
