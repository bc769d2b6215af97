//! The Lua scripts, compiled into the binary and run by SHA (EVALSHA, with a transparent
//! reload after a `SCRIPT FLUSH` or a Redis restart).
//!
//! Redis scripts cannot load each other, so what several share is put ahead of each when
//! it is built here: the table of algorithm numbers (made from [`Algorithm::index`], the
//! one source of those numbers) and, for the acquire scripts beyond the token bucket, the
//! checks of `lua/lib/acquire_gate.lua`.

use std::ops::Deref;
use std::sync::LazyLock;

use redis::Script;

use crate::decide::reply::{Code, batch_args_lua_table};
use crate::domain::Algorithm;

/// A script as Redis runs it: its whole source and its SHA.
pub struct LuaScript {
    source: String,
    script: Script,
}

impl LuaScript {
    /// `parts` joined, the shebang line (`#!lua flags=...`) of the part that has one put first.
    fn build(parts: &[&str]) -> Self {
        let mut source = String::new();
        let mut rest: Vec<&str> = parts.to_vec();
        // The entry script (last) or a library ahead of it may carry the flags.
        if let Some(part) = rest.iter_mut().find(|p| p.starts_with("#!")) {
            let (shebang, body) = part.split_once('\n').unwrap_or((part, ""));
            source.push_str(shebang);
            source.push('\n');
            *part = body;
        }
        source.push_str(&algorithm_table());
        source.push_str(&Code::lua_table());
        source.push_str(&batch_args_lua_table());
        for part in rest {
            source.push_str(part);
        }
        let script = Script::new(&source);
        Self { source, script }
    }

    /// The whole source, as sent with `EVAL` or `SCRIPT LOAD`.
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl Deref for LuaScript {
    type Target = Script;

    fn deref(&self) -> &Script {
        &self.script
    }
}

/// The integers of [`ACQUIRE_BATCH`]'s reply, one string of 8-byte little-endian
/// integers (`lua/acquire_batch.lua`); `None` when its length is not a whole number of them.
pub fn batch_reply_integers(packed: &[u8]) -> Option<Vec<i64>> {
    let (integers, rest) = packed.as_chunks::<8>();
    rest.is_empty()
        .then(|| integers.iter().map(|b| i64::from_le_bytes(*b)).collect())
}

/// `local ALGORITHM_INDEX = {token_bucket = 1, ...}`: the numbers by which the scripts
/// name an algorithm in a reply (e.g. the "wrong algorithm" reply `{-4, index, ...}`).
fn algorithm_table() -> String {
    let entries: Vec<String> = Algorithm::ALL
        .iter()
        .map(|a| format!("{} = {}", a.as_str(), a.index()))
        .collect();
    format!("local ALGORITHM_INDEX = {{{}}}\n", entries.join(", "))
}

/// Loads a file of `lua/` at compile time.
macro_rules! lua {
    ($file:literal) => {
        include_str!(concat!("../../lua/", $file))
    };
}

/// A script made of `lua/` files, the first ones defining what the last one uses.
macro_rules! script {
    ($name:ident, [$($file:literal),+]) => {
        pub static $name: LazyLock<LuaScript> =
            LazyLock::new(|| LuaScript::build(&[$(lua!($file)),+]));
    };
}

// The flusher's counts of one policy: usage and top callers in one call.
script!(FLUSH_POLICY, ["flush_policy.lua"]);
// Every acquire reads Redis' clock with `lib/clock.lua`. Global policies: config and state
// in the policy's hash (and a state key beside it). `lib/acquire_gate.lua` holds the
// checks the algorithms beyond the token bucket share; `lib/<algorithm>.lua` each
// algorithm's decision and its acquire, global and keyed, which its single scripts and
// the batch script call (one source of truth per algorithm).
script!(
    TOKEN_BUCKET,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/token_bucket.lua",
        "lib/token_bucket_global.lua",
        "token_bucket.lua"
    ]
);
// Acquires that arrived together, of any policies and algorithms, in one call.
script!(
    ACQUIRE_BATCH,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/keyed.lua",
        "lib/token_bucket.lua",
        "lib/token_bucket_global.lua",
        "lib/keyed_token_bucket.lua",
        "lib/fixed_window.lua",
        "lib/sliding_log.lua",
        "lib/sliding_window.lua",
        "lib/concurrency.lua",
        "lib/gcra.lua",
        "acquire_batch.lua"
    ]
);
// Several acquires all or nothing (`acquire_all.lua`), and give-backs: refunds and the
// grants of an all-or-nothing acquire undone across a cluster's slots (`give_back.lua`);
// every algorithm's acquire and give-back, global and keyed.
script!(
    ACQUIRE_ALL,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/keyed.lua",
        "lib/token_bucket.lua",
        "lib/token_bucket_global.lua",
        "lib/keyed_token_bucket.lua",
        "lib/fixed_window.lua",
        "lib/sliding_log.lua",
        "lib/sliding_window.lua",
        "lib/concurrency.lua",
        "lib/gcra.lua",
        "acquire_all.lua"
    ]
);
script!(
    GIVE_BACK,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/keyed.lua",
        "lib/token_bucket.lua",
        "lib/token_bucket_global.lua",
        "lib/keyed_token_bucket.lua",
        "lib/fixed_window.lua",
        "lib/sliding_log.lua",
        "lib/sliding_window.lua",
        "lib/concurrency.lua",
        "lib/gcra.lua",
        "give_back.lua"
    ]
);
script!(
    FIXED_WINDOW,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/fixed_window.lua",
        "fixed_window.lua"
    ]
);
script!(
    SLIDING_LOG,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/sliding_log.lua",
        "sliding_log.lua"
    ]
);
script!(
    SLIDING_WINDOW,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/sliding_window.lua",
        "sliding_window.lua"
    ]
);
script!(
    CONCURRENCY_ACQUIRE,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/concurrency.lua",
        "concurrency_acquire.lua"
    ]
);
// (The gate is loaded too, though a release passes no gate: the library's acquires use it.)
script!(
    CONCURRENCY_RELEASE,
    [
        "lib/acquire_gate.lua",
        "lib/concurrency.lua",
        "concurrency_release.lua"
    ]
);
script!(
    GCRA,
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/gcra.lua",
        "gcra.lua"
    ]
);
script!(SYNC_POLICY, ["sync_policy.lua"]);
script!(POLICY_STATE, ["lib/policy_state.lua", "policy_state.lua"]);
script!(POLICIES_LIVE, ["lib/policy_state.lua", "policies_live.lua"]);
script!(DELETE_IF_STALE, ["delete_if_stale.lua"]);

// Keyed policies (per_app, per_key): one bucket key per caller, the config in ARGV
// (`lib/keyed.lua`), the same algorithms' libraries (the gate is loaded because their
// global acquires use it; a keyed acquire passes none).
macro_rules! keyed_script {
    ($name:ident, [$($file:literal),+]) => {
        script!(
            $name,
            [
                "lib/clock.lua",
                "lib/acquire_gate.lua",
                "lib/keyed.lua",
                $($file),+
            ]
        );
    };
}
keyed_script!(
    KEYED_TOKEN_BUCKET,
    [
        "lib/token_bucket.lua",
        "lib/keyed_token_bucket.lua",
        "keyed/token_bucket.lua"
    ]
);
keyed_script!(
    KEYED_FIXED_WINDOW,
    ["lib/fixed_window.lua", "keyed/fixed_window.lua"]
);
keyed_script!(
    KEYED_SLIDING_LOG,
    ["lib/sliding_log.lua", "keyed/sliding_log.lua"]
);
keyed_script!(
    KEYED_SLIDING_WINDOW,
    ["lib/sliding_window.lua", "keyed/sliding_window.lua"]
);
keyed_script!(
    KEYED_CONCURRENCY_ACQUIRE,
    ["lib/concurrency.lua", "keyed/concurrency_acquire.lua"]
);
script!(
    KEYED_CONCURRENCY_RELEASE,
    [
        "lib/acquire_gate.lua",
        "lib/concurrency.lua",
        "keyed/concurrency_release.lua"
    ]
);
keyed_script!(KEYED_GCRA, ["lib/gcra.lua", "keyed/gcra.lua"]);

/// The keyed acquire script of an algorithm.
pub fn keyed_acquire_script(algorithm: Algorithm) -> &'static LuaScript {
    match algorithm {
        Algorithm::TokenBucket => &KEYED_TOKEN_BUCKET,
        Algorithm::FixedWindow => &KEYED_FIXED_WINDOW,
        Algorithm::SlidingLog => &KEYED_SLIDING_LOG,
        Algorithm::SlidingWindow => &KEYED_SLIDING_WINDOW,
        Algorithm::Concurrency => &KEYED_CONCURRENCY_ACQUIRE,
        Algorithm::Gcra => &KEYED_GCRA,
    }
}

/// The acquire script of an algorithm.
pub fn acquire_script(algorithm: Algorithm) -> &'static LuaScript {
    match algorithm {
        Algorithm::TokenBucket => &TOKEN_BUCKET,
        Algorithm::FixedWindow => &FIXED_WINDOW,
        Algorithm::SlidingLog => &SLIDING_LOG,
        Algorithm::SlidingWindow => &SLIDING_WINDOW,
        Algorithm::Concurrency => &CONCURRENCY_ACQUIRE,
        Algorithm::Gcra => &GCRA,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_gets_the_algorithm_numbers_and_keeps_its_flags_first() {
        let table = algorithm_table();
        assert!(table.contains("token_bucket = 1") && table.contains("gcra = 6"));
        for script in [&TOKEN_BUCKET, &FIXED_WINDOW, &SYNC_POLICY, &DELETE_IF_STALE] {
            assert!(script.source().starts_with(&table));
        }
        let state = POLICY_STATE.source();
        assert!(state.starts_with("#!lua flags=no-writes\nlocal ALGORITHM_INDEX = {"));
    }

    #[test]
    fn a_batch_reply_reads_as_little_endian_integers_or_not_at_all() {
        let packed: Vec<u8> = [1i64, -1, 1_000_000_000_000_000]
            .iter()
            .flat_map(|n| n.to_le_bytes())
            .collect();
        assert_eq!(
            batch_reply_integers(&packed),
            Some(vec![1, -1, 1_000_000_000_000_000])
        );
        assert_eq!(batch_reply_integers(&[]), Some(vec![]));
        assert_eq!(batch_reply_integers(&packed[..20]), None);
    }
}
