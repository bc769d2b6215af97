//! The Lua scripts, compiled into the binary and run by SHA (EVALSHA, with a transparent
//! reload after a `SCRIPT FLUSH` or a Redis restart).

use std::sync::LazyLock;

use redis::Script;

use crate::domain::Algorithm;

macro_rules! script {
    ($name:ident, $file:literal) => {
        pub static $name: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!(concat!("../../lua/", $file))));
    };
    // A script that calls the checks of `lua/lib/acquire_gate.lua`, loaded ahead of it.
    ($name:ident, $file:literal, gated) => {
        pub static $name: LazyLock<Script> = LazyLock::new(|| {
            Script::new(concat!(
                include_str!("../../lua/lib/acquire_gate.lua"),
                include_str!(concat!("../../lua/", $file))
            ))
        });
    };
}

script!(TOKEN_BUCKET, "token_bucket.lua");
script!(FIXED_WINDOW, "fixed_window.lua", gated);
script!(SLIDING_LOG, "sliding_log.lua", gated);
script!(SLIDING_WINDOW, "sliding_window.lua", gated);
script!(CONCURRENCY_ACQUIRE, "concurrency_acquire.lua", gated);
script!(CONCURRENCY_RELEASE, "concurrency_release.lua", gated);
script!(GCRA, "gcra.lua", gated);
script!(SYNC_POLICY, "sync_policy.lua");
script!(POLICY_STATE, "policy_state.lua");
script!(DELETE_IF_STALE, "delete_if_stale.lua");

/// The acquire script of an algorithm.
pub fn acquire_script(algorithm: Algorithm) -> &'static Script {
    match algorithm {
        Algorithm::TokenBucket => &TOKEN_BUCKET,
        Algorithm::FixedWindow => &FIXED_WINDOW,
        Algorithm::SlidingLog => &SLIDING_LOG,
        Algorithm::SlidingWindow => &SLIDING_WINDOW,
        Algorithm::Concurrency => &CONCURRENCY_ACQUIRE,
        Algorithm::Gcra => &GCRA,
    }
}
