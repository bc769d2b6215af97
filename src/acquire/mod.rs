//! The acquire path (the data plane): answering `POST /v1/acquire` (and Envoy's
//! `ShouldRateLimit`) with one Redis round trip and no SQL (also several acquires all or
//! nothing, and checks: `all`), refunds, and what an instance keeps in memory for it.

mod acquirer;
mod all;
mod blocked;
mod caller;
mod denials;
mod flusher;
pub mod headers;
mod held_counts;
mod new_keys;
mod outcome;
mod protocol;
mod refund;
mod tally;

pub use acquirer::Acquirer;
pub use all::{AcquiredAll, AllItem, AllRefused};
pub use blocked::BLOCKED_RETRY_AFTER_MS;
pub use caller::{Partition, partition_of};
pub use denials::DenialCache;
pub use flusher::{FlushedDenials, run_flusher, unix_minute_now};
pub use new_keys::announcement;
pub use outcome::{Acquired, KeyRefused, Outcome, REVOKED, Refusal};
pub use protocol::Protocol;
pub use tally::{AppRefusals, OutcomeCounts, SKETCH_SIZE, Taken, Tally, TallyRegistry};
