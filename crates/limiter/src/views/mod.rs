//! What the console reads of Redis: a bucket's live state, an application's page of
//! policies with their counts, one policy's page. Nothing here writes.

pub(crate) mod keyed_state;
pub(crate) mod live;
mod policy_live;
pub(crate) mod state;

pub use live::{LiveView, StateRead, StoredBucket};
pub use policy_live::PolicyLive;
pub use state::BucketState;
