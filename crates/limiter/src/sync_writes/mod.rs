//! What the sync task writes to Redis (policies pushed, reconciled and deleted), the
//! change notices that tell every instance to reload, and the API keys announced until
//! they have.

mod changes;
mod new_keys;
mod writes;

pub use changes::listen_for_changes;
pub use writes::PushStats;
