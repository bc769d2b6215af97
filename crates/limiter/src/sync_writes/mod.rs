//! What the sync task writes to Redis (policies pushed, reconciled and deleted) and the
//! change notices that tell every instance to reload.

mod changes;
mod writes;

pub use changes::listen_for_changes;
pub use writes::PushStats;
