//! The same never-reached token bucket as `never_reached.rs`, as the limiter crate takes a
//! policy (`PolicyConfig`), for the tools that push it with `Limiter::push_policy`: the
//! script-cost example and the bench's redis-benchmark step.

use ratekeeper_limiter::PolicyConfig;
use ratekeeper_limiter::domain::{Algorithm, Mode, PolicyName, Scope};

/// A global token bucket whose limit is never reached (rate 1,000,000/s, capacity 10^9),
/// allowing the application `app`: what is measured is the path, not denials.
pub fn never_reached(name: PolicyName, app: &str) -> PolicyConfig {
    PolicyConfig {
        name,
        created_ms: 1,
        version: 1,
        algorithm: Algorithm::TokenBucket,
        max_permits: 1_000_000_000,
        rate: 1_000_000.0,
        window_ms: None,
        lease_ttl_ms: None,
        apps: format!(",{app},"),
        enabled: true,
        scope: Scope::Global,
        mode: Mode::Enforce,
    }
}
