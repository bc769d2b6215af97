//! The policy hash the bench examples decide on: a global token bucket whose limit is never
//! reached (rate 1,000,000/s, capacity 10^9), as the sync task writes one, so that what
//! they measure is the path, not denials.

/// The arguments that follow the app in its token bucket's acquire: its configuration as
/// an instance passes it (max_permits, rate, gate, version, created_ms, then "1": the state
/// goes to its own key; `lua/lib/token_bucket_global.lua`), the same as the hash's below.
pub const NEVER_REACHED_PASSED: [&str; 6] = ["1000000000", "1000000", "1", "1", "1", "1"];

/// The hash fields of such a policy allowing `apps` (as the hash holds them: `,<slug>,`).
pub fn never_reached_policy(apps: &str) -> [(&'static str, &str); 6] {
    [
        ("max_permits", "1000000000"),
        ("rate", "1000000"),
        ("apps", apps),
        ("enabled", "1"),
        ("version", "1"),
        ("created_ms", "1"),
    ]
}
