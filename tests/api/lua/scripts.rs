//! The Lua scripts as the Lua tests run them (straight through Redis, by SHA), and the
//! algorithms' names, indexes and state keys as the scripts know them.

use redis::Script;

// The very scripts the server loads (the gated ones with their shared checks ahead).
pub(crate) use ratekeeper_limiter::scripts::{
    CONCURRENCY_ACQUIRE, CONCURRENCY_RELEASE, DELETE_IF_STALE, FIXED_WINDOW, GCRA, SLIDING_LOG,
    SLIDING_WINDOW, SYNC_POLICY, TOKEN_BUCKET,
};

pub(crate) use Algo::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algo {
    TokenBucket,
    FixedWindow,
    SlidingLog,
    SlidingWindow,
    Concurrency,
    Gcra,
}

impl Algo {
    pub(crate) const ALL: [Algo; 6] = [
        TokenBucket,
        FixedWindow,
        SlidingLog,
        SlidingWindow,
        Concurrency,
        Gcra,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            TokenBucket => "token_bucket",
            FixedWindow => "fixed_window",
            SlidingLog => "sliding_log",
            SlidingWindow => "sliding_window",
            Concurrency => "concurrency",
            Gcra => "gcra",
        }
    }

    /// The index a script of another algorithm answers with its -4.
    pub(crate) fn index(self) -> i64 {
        match self {
            TokenBucket => 1,
            FixedWindow => 2,
            SlidingLog => 3,
            SlidingWindow => 4,
            Concurrency => 5,
            Gcra => 6,
        }
    }

    pub(crate) fn script(self) -> &'static Script {
        match self {
            TokenBucket => &TOKEN_BUCKET,
            FixedWindow => &FIXED_WINDOW,
            SlidingLog => &SLIDING_LOG,
            SlidingWindow => &SLIDING_WINDOW,
            Concurrency => &CONCURRENCY_ACQUIRE,
            Gcra => &GCRA,
        }
    }

    /// The state key of its own the script takes as KEYS[2], if any.
    pub(crate) fn state_suffix(self) -> Option<&'static str> {
        match self {
            TokenBucket => Some("tb"),
            FixedWindow => Some("fw"),
            SlidingLog => Some("log"),
            Concurrency => Some("leases"),
            SlidingWindow | Gcra => None,
        }
    }

    /// What follows the app among a global acquire's arguments: for the token bucket, the
    /// policy's configuration as an instance has it, here an instance that does not know
    /// the policy (its hash decides) and moves the state to its state key
    /// (`lua/lib/token_bucket_global.lua`).
    pub(crate) fn config_args(self) -> &'static [&'static str] {
        match self {
            TokenBucket => &["0", "0", "0", "-", "-", "1"],
            _ => &[],
        }
    }

    pub(crate) fn windowed(self) -> bool {
        matches!(self, FixedWindow | SlidingLog | SlidingWindow)
    }
}
