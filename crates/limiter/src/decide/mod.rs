//! Deciding acquires: an acquire as the scripts take it, the batcher every acquire goes
//! through, the keyed buckets, and the releases of leases.

mod batch;
mod batch_figures;
mod batch_plan;
pub(crate) mod call;
pub(crate) mod decision;
pub(crate) mod keyed;
mod oracle;
mod release;
pub mod reply;

pub use batch::Batcher;
pub use batch_figures::BatchFigures;
pub use call::AcquireCall;
pub use decision::{AcquireOutcome, Decided, Decision, LeaseId};
pub use keyed::{BucketLimits, KeyedBucket};
pub use release::ReleaseOutcome;
