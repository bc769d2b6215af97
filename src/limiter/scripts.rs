//! The Lua scripts, compiled into the binary and run by SHA (EVALSHA, with a transparent
//! reload after a `SCRIPT FLUSH` or a Redis restart).

use std::sync::LazyLock;

use redis::Script;

pub static TOKEN_BUCKET: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/token_bucket.lua")));
pub static SYNC_POLICY: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/sync_policy.lua")));
pub static BUCKET_STATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/bucket_state.lua")));
pub static DELETE_IF_STALE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/delete_if_stale.lua")));
