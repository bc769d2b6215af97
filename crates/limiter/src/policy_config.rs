//! A policy as Redis and the scripts take it: what the sync writes into a global policy's
//! hash, and what the instance passes with each acquire of a keyed policy's bucket.

use crate::domain::{Algorithm, Mode, PolicyName, PolicySpec, Scope};

/// The part of a policy that Redis holds, in the exact strings the scripts compare.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    pub name: PolicyName,
    pub created_ms: i64,
    pub version: i64,
    pub algorithm: Algorithm,
    pub max_permits: i64,
    /// 0 for the algorithms that take no rate.
    pub rate: f64,
    pub window_ms: Option<i64>,
    pub lease_ttl_ms: Option<i64>,
    pub apps: String,
    pub enabled: bool,
    /// A keyed policy's hash holds its config only: its scripts never decide on it, and
    /// the global scripts refuse it (see `lua/lib/acquire_gate.lua`).
    pub scope: Scope,
    /// Shadow: decided and counted, but granted (the scripts answer code 3 for a denial).
    pub mode: Mode,
}

impl PolicyConfig {
    pub fn new(spec: &PolicySpec, created_ms: i64, version: i64) -> Self {
        // ",a,b,": the delimiters on both ends make the Lua membership test exact.
        let mut apps = String::from(",");
        for app in &spec.allowed_apps {
            apps.push_str(app.as_str());
            apps.push(',');
        }
        Self {
            name: spec.name.clone(),
            created_ms,
            version,
            algorithm: spec.algorithm,
            max_permits: spec.max_permits.get(),
            rate: spec.rate.map_or(0.0, |r| r.get()),
            window_ms: spec.window_ms.map(|w| w.get()),
            lease_ttl_ms: spec.lease_ttl_ms.map(|l| l.get()),
            apps,
            enabled: spec.enabled,
            scope: spec.scope,
            mode: spec.mode,
        }
    }
}
