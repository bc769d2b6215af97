//! The Lua scripts, compiled into the binary and run by SHA (EVALSHA, with a transparent
//! reload after a `SCRIPT FLUSH` or a Redis restart); those of the acquire path are called
//! as functions of one library instead (`functions.rs`), which their [`LuaScript::call_cmd`]
//! names.
//!
//! Redis scripts cannot load each other, so what several share is put ahead of each when
//! it is built here: the table of algorithm numbers (made from [`Algorithm::index`], the
//! one source of those numbers) and, for the acquire scripts beyond the token bucket, the
//! checks of `lua/lib/acquire_gate.lua`.

use std::ops::Deref;
use std::sync::LazyLock;

use redis::{Cmd, Script};

use super::functions;

use crate::decide::reply::{Code, batch_args_lua_table};
use crate::domain::Algorithm;

/// A script as Redis runs it: its whole source and its SHA, and for a script of the
/// acquire path, its function in the library of `functions.rs`, which the acquire path
/// calls instead.
pub struct LuaScript {
    source: String,
    script: Script,
    /// Its `lua/` files, in order.
    files: Vec<&'static str>,
    /// The library's function for it (the name of its entry in [`functions::ENTRIES`]).
    function: Option<&'static str>,
}

impl LuaScript {
    /// `parts` (file names and contents) joined, the shebang line (`#!lua flags=...`) of
    /// the part that has one put first.
    fn build(parts: &[(&'static str, &'static str)], function: Option<&'static str>) -> Self {
        let files = parts.iter().map(|(file, _)| *file).collect();
        let mut source = String::new();
        let mut rest: Vec<&str> = parts.iter().map(|(_, text)| *text).collect();
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
        Self {
            source,
            script,
            files,
            function,
        }
    }

    /// The whole source, as sent with `EVAL` or `SCRIPT LOAD`.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The start of a call of it with `keys` keys, the keys and arguments to follow:
    /// `FCALL` of its function in the library when it has one, else `EVALSHA`.
    pub fn call_cmd(&self, keys: usize) -> Cmd {
        let mut cmd = match self.function {
            Some(entry) => {
                let mut cmd = redis::cmd("FCALL");
                cmd.arg(functions::LIBRARY.function(entry));
                cmd
            }
            None => {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(self.script.get_hash());
                cmd
            }
        };
        cmd.arg(keys);
        cmd
    }

    /// Its `lua/` files, in order (the last one the entry script).
    pub fn files(&self) -> &[&'static str] {
        &self.files
    }

    /// Whether its calls are `FCALL`s of the library.
    pub fn in_library(&self) -> bool {
        self.function.is_some()
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
pub(crate) fn algorithm_table() -> String {
    let entries: Vec<String> = Algorithm::ALL
        .iter()
        .map(|a| format!("{} = {}", a.as_str(), a.index()))
        .collect();
    format!("local ALGORITHM_INDEX = {{{}}}\n", entries.join(", "))
}

/// The text of a file of `lua/` (every one is compiled in, listed here once).
macro_rules! lua_files {
    ($($file:literal),+ $(,)?) => {
        pub(crate) fn lua_file(name: &str) -> &'static str {
            match name {
                $($file => include_str!(concat!("../../lua/", $file)),)+
                other => panic!("no file lua/{other} is compiled in"),
            }
        }
    };
}
lua_files!(
    "lib/by_algorithm.lua",
    "acquire_all.lua",
    "acquire_batch.lua",
    "concurrency_acquire.lua",
    "concurrency_release.lua",
    "delete_if_stale.lua",
    "episodes.lua",
    "fixed_window.lua",
    "flush_policies.lua",
    "gcra.lua",
    "give_back.lua",
    "keyed/concurrency_acquire.lua",
    "keyed/concurrency_release.lua",
    "keyed/fixed_window.lua",
    "keyed/gcra.lua",
    "keyed/sliding_log.lua",
    "keyed/sliding_window.lua",
    "keyed/token_bucket.lua",
    "lib/acquire_gate.lua",
    "lib/clock.lua",
    "lib/concurrency.lua",
    "lib/fixed_window.lua",
    "lib/gcra.lua",
    "lib/keyed.lua",
    "lib/keyed_token_bucket.lua",
    "lib/policy_state.lua",
    "lib/sliding_log.lua",
    "lib/sliding_window.lua",
    "lib/token_bucket.lua",
    "lib/token_bucket_global.lua",
    "policies_live.lua",
    "policy_state.lua",
    "sliding_log.lua",
    "sliding_window.lua",
    "sync_policy.lua",
    "token_bucket.lua",
);

/// A script made of `lua/` files, the first ones defining what the last one uses; with
/// `function`, its entry's name in the library (an acquire-path script).
macro_rules! script {
    ($name:ident, [$($file:literal),+]) => {
        pub static $name: LazyLock<LuaScript> =
            LazyLock::new(|| LuaScript::build(&[$(($file, lua_file($file))),+], None));
    };
    ($name:ident, function $entry:literal, [$($file:literal),+]) => {
        pub static $name: LazyLock<LuaScript> =
            LazyLock::new(|| LuaScript::build(&[$(($file, lua_file($file))),+], Some($entry)));
    };
}

// The flusher's counts of some policies: usage and top callers in one call.
script!(FLUSH_POLICIES, ["flush_policies.lua"]);
// The episodes webhooks report, changed once for every instance.
script!(EPISODES, ["episodes.lua"]);
// Every acquire reads Redis' clock with `lib/clock.lua`. Global policies: config and state
// in the policy's hash (and a state key beside it). `lib/acquire_gate.lua` holds the
// checks the algorithms beyond the token bucket share; `lib/<algorithm>.lua` each
// algorithm's decision and its acquire, global and keyed, which its single scripts and
// the batch script call (one source of truth per algorithm).
script!(
    TOKEN_BUCKET,
    function "token_bucket",
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/token_bucket.lua",
        "lib/token_bucket_global.lua",
        "token_bucket.lua"
    ]
);
/// A script of the acquire path that takes requests of every algorithm: the whole of the
/// library's definitions ([`functions::LIBRARY_FILES`]) ahead of its entry file.
macro_rules! every_algorithm_script {
    ($name:ident, $entry:literal, $file:literal) => {
        pub static $name: LazyLock<LuaScript> = LazyLock::new(|| {
            let mut parts: Vec<(&'static str, &'static str)> = functions::LIBRARY_FILES
                .iter()
                .map(|file| (*file, lua_file(file)))
                .collect();
            parts.push(($file, lua_file($file)));
            LuaScript::build(&parts, Some($entry))
        });
    };
}
// Acquires that arrived together, of any policies and algorithms, in one call.
every_algorithm_script!(ACQUIRE_BATCH, "acquire_batch", "acquire_batch.lua");
// Several acquires all or nothing (`acquire_all.lua`), and give-backs: refunds and the
// grants of an all-or-nothing acquire undone across a cluster's slots (`give_back.lua`);
// every algorithm's acquire and give-back, global and keyed.
every_algorithm_script!(ACQUIRE_ALL, "acquire_all", "acquire_all.lua");
every_algorithm_script!(GIVE_BACK, "give_back", "give_back.lua");
script!(
    FIXED_WINDOW,
    function "fixed_window",
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/fixed_window.lua",
        "fixed_window.lua"
    ]
);
script!(
    SLIDING_LOG,
    function "sliding_log",
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/sliding_log.lua",
        "sliding_log.lua"
    ]
);
script!(
    SLIDING_WINDOW,
    function "sliding_window",
    [
        "lib/clock.lua",
        "lib/acquire_gate.lua",
        "lib/sliding_window.lua",
        "sliding_window.lua"
    ]
);
script!(
    CONCURRENCY_ACQUIRE,
    function "concurrency_acquire",
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
    function "gcra",
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
    ($name:ident, $entry:literal, [$($file:literal),+]) => {
        script!(
            $name,
            function $entry,
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
    "keyed_token_bucket",
    [
        "lib/token_bucket.lua",
        "lib/keyed_token_bucket.lua",
        "keyed/token_bucket.lua"
    ]
);
keyed_script!(
    KEYED_FIXED_WINDOW,
    "keyed_fixed_window",
    ["lib/fixed_window.lua", "keyed/fixed_window.lua"]
);
keyed_script!(
    KEYED_SLIDING_LOG,
    "keyed_sliding_log",
    ["lib/sliding_log.lua", "keyed/sliding_log.lua"]
);
keyed_script!(
    KEYED_SLIDING_WINDOW,
    "keyed_sliding_window",
    ["lib/sliding_window.lua", "keyed/sliding_window.lua"]
);
keyed_script!(
    KEYED_CONCURRENCY_ACQUIRE,
    "keyed_concurrency_acquire",
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
keyed_script!(KEYED_GCRA, "keyed_gcra", ["lib/gcra.lua", "keyed/gcra.lua"]);

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

    /// Every script of the acquire path is, as a function of the library, the same entry
    /// file after the same definitions (its libraries a part of the library's, in the
    /// library's order), so both forms decide alike.
    #[test]
    fn every_library_script_is_its_entry_after_a_part_of_the_librarys_definitions() {
        let library_scripts = [
            &TOKEN_BUCKET,
            &ACQUIRE_BATCH,
            &ACQUIRE_ALL,
            &GIVE_BACK,
            &FIXED_WINDOW,
            &SLIDING_LOG,
            &SLIDING_WINDOW,
            &CONCURRENCY_ACQUIRE,
            &GCRA,
            &KEYED_TOKEN_BUCKET,
            &KEYED_FIXED_WINDOW,
            &KEYED_SLIDING_LOG,
            &KEYED_SLIDING_WINDOW,
            &KEYED_CONCURRENCY_ACQUIRE,
            &KEYED_GCRA,
        ];
        assert_eq!(library_scripts.len(), functions::ENTRIES.len());
        for script in library_scripts {
            let entry = script.function.expect("a function of the library");
            let (_, file) = functions::ENTRIES
                .iter()
                .find(|(name, _)| *name == entry)
                .expect("an entry of the library");
            let (last, libs) = script.files().split_last().unwrap();
            assert_eq!(last, file, "{entry}");
            let mut library = functions::LIBRARY_FILES.iter();
            for lib in libs {
                assert!(library.any(|l| l == lib), "{entry}: {lib} out of order");
            }
        }
        for script in [&SYNC_POLICY, &POLICY_STATE, &CONCURRENCY_RELEASE] {
            assert!(!script.in_library());
        }
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
