//! The acquire scripts as one Redis Functions library (`FUNCTION LOAD`, called with `FCALL`).
//!
//! An `EVALSHA` runs its whole script at every call, so a script that carries the libraries
//! of `lua/lib/` defines each of their functions and tables again before it decides
//! anything: for the batch script, which carries them all, that is most of what a small
//! batch costs Redis (bench/README.md). A function library is loaded once; its functions
//! here build the libraries' definitions at their first call and keep them, so a call
//! only runs the entry script's own body.
//!
//! The library holds the entry scripts of the acquire path ([`ENTRIES`]), each the body of
//! a function that takes `KEYS` and `ARGV` as its arguments, beside the libraries of
//! [`LIBRARY_FILES`] (a superset, in the same order, of what each script carries as an
//! `EVALSHA` script: `scripts.rs` checks it). Its name carries a digest of its source, so
//! instances of different versions on one Redis each call their own functions; a Redis
//! that lost its functions (a restart without persistence, `FUNCTION FLUSH`, a new cluster
//! master) gets the library again at the first call that finds it missing.

use std::sync::LazyLock;

use redis::{Cmd, RedisError};

use crate::decide::reply::{Code, batch_args_lua_table};

/// The files of `lua/lib/` the entry scripts use, in the order they are defined.
pub(crate) const LIBRARY_FILES: [&str; 12] = [
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
    "lib/by_algorithm.lua",
];

/// The entry scripts in the library: each function's name (after the library's) and the
/// `lua/` file that is its body.
pub(crate) const ENTRIES: [(&str, &str); 15] = [
    ("acquire_batch", "acquire_batch.lua"),
    ("acquire_all", "acquire_all.lua"),
    ("give_back", "give_back.lua"),
    ("token_bucket", "token_bucket.lua"),
    ("fixed_window", "fixed_window.lua"),
    ("sliding_log", "sliding_log.lua"),
    ("sliding_window", "sliding_window.lua"),
    ("concurrency_acquire", "concurrency_acquire.lua"),
    ("gcra", "gcra.lua"),
    ("keyed_token_bucket", "keyed/token_bucket.lua"),
    ("keyed_fixed_window", "keyed/fixed_window.lua"),
    ("keyed_sliding_log", "keyed/sliding_log.lua"),
    ("keyed_sliding_window", "keyed/sliding_window.lua"),
    ("keyed_concurrency_acquire", "keyed/concurrency_acquire.lua"),
    ("keyed_gcra", "keyed/gcra.lua"),
];

/// The library as this build loads it.
pub struct FunctionLibrary {
    name: String,
    source: String,
}

pub static LIBRARY: LazyLock<FunctionLibrary> = LazyLock::new(FunctionLibrary::build);

impl FunctionLibrary {
    fn build() -> Self {
        let mut definitions = String::new();
        definitions.push_str(&super::scripts::algorithm_table());
        definitions.push_str(&Code::lua_table());
        definitions.push_str(&batch_args_lua_table());
        for file in LIBRARY_FILES {
            definitions.push_str(super::scripts::lua_file(file));
        }
        definitions.push_str("return {\n");
        for (name, file) in ENTRIES {
            definitions.push_str(&format!("{name} = function(KEYS, ARGV)\n"));
            definitions.push_str(super::scripts::lua_file(file));
            definitions.push_str("\nend,\n");
        }
        definitions.push_str("}\n");
        // The digest names this version's library and functions (SHA-1, as `EVALSHA` names
        // a script; 16 hex digits are plenty to tell versions apart).
        let digest = redis::Script::new(&definitions).get_hash()[..16].to_owned();
        let name = format!("ratekeeper_{digest}");
        let mut source = format!("#!lua name={name}\n");
        source.push_str("local entries = nil\nlocal function definitions()\n");
        source.push_str(&definitions);
        source.push_str(
            "end\n\
             local function run(entry, keys, args)\n\
             \x20 if not entries then\n\
             \x20   entries = definitions()\n\
             \x20 end\n\
             \x20 return entries[entry](keys, args)\n\
             end\n",
        );
        for (entry, _) in ENTRIES {
            source.push_str(&format!(
                "redis.register_function('{name}_{entry}', function(keys, args) \
                 return run('{entry}', keys, args) end)\n"
            ));
        }
        Self { name, source }
    }

    /// The name under which the library's function for `entry` (one of [`ENTRIES`]) is
    /// registered.
    pub fn function(&self, entry: &str) -> String {
        debug_assert!(ENTRIES.iter().any(|(name, _)| *name == entry));
        format!("{}_{entry}", self.name)
    }

    /// The library's name (`ratekeeper_<digest>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole source, as `FUNCTION LOAD` takes it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// `FUNCTION LOAD REPLACE`: on a cluster, sent to every master. Replacing is safe: a
    /// library of this name is this very source.
    pub fn load_cmd(&self) -> Cmd {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("LOAD").arg("REPLACE").arg(&self.source);
        cmd
    }
}

/// Whether Redis answered an `FCALL` that it has no such function (it lost the library).
pub(crate) fn is_function_missing(e: &RedisError) -> bool {
    e.detail()
        .is_some_and(|detail| detail.starts_with("Function not found"))
}

/// Whether Redis does not know `FCALL` at all (older than 7.0).
pub(crate) fn is_without_functions(e: &RedisError) -> bool {
    e.detail()
        .is_some_and(|detail| detail.starts_with("unknown command") && detail.contains("FCALL"))
}
