//! Sign-in attempts limited: the guard the console's sign-in asks (`guard`), its buckets
//! in Redis (`own_buckets`), and the same buckets counted in this process while Redis
//! cannot be reached (`fallback`).

mod fallback;
mod guard;
mod own_buckets;

pub use fallback::LocalBuckets;
pub use guard::{forgive, take_attempt};
