//! The Lua scripts driven straight through Redis, without the server: the scripts as the
//! tests run them and what the tests know of each algorithm (`scripts`), the token bucket
//! (`token_bucket`), the other algorithms with the shared checks, the sync script and
//! accuracy under load (`algorithms`), the read-only report of a policy's live state
//! (`state`), the console's live view of many policies (`live`), the global token
//! bucket's state key beside the version before it (`state_key`), and the episodes
//! webhooks report (`episodes`).

mod algorithms;
mod batch;
mod episodes;
mod flush;
mod keyed_expiry;
mod live;
mod scripts;
mod state;
mod state_key;
mod token_bucket;
