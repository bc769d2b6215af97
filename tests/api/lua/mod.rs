//! The Lua scripts driven straight through Redis, without the server: the scripts as the
//! tests run them and what the tests know of each algorithm (`scripts`), the token bucket
//! (`token_bucket`), the other algorithms with the shared checks, the sync script and
//! accuracy under load (`algorithms`), and the read-only report of a policy's live state
//! (`state`).

mod algorithms;
mod batch;
mod flush;
mod scripts;
mod state;
mod token_bucket;
