//! Deciding acquires: an acquire as the scripts take it, the batcher every acquire goes
//! through (with all-or-nothing acquires and refunds as jobs of its queue), the keyed
//! buckets, and the releases of leases.

mod all;
mod batch;
mod batch_calls;
mod batch_figures;
mod batch_plan;
pub(crate) mod call;
pub(crate) mod decision;
mod give_back;
pub(crate) mod keyed;
mod oracle;
mod release;
pub mod reply;

pub use all::{AllAsk, AllTarget};
pub use batch::Batcher;
pub use batch_figures::BatchFigures;
pub use call::AcquireCall;
pub use decision::{AcquireOutcome, Decided, Decision, LeaseId};
pub use give_back::RefundOutcome;
pub use keyed::{BucketLimits, KeyedBucket};
pub use release::ReleaseOutcome;
