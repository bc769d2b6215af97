//! The one-off readings of a run beside the wrk figures: the policy set-up, Redis' memory
//! around it and around round 1's scenarios, the keyed buckets, the top callers, the
//! server's memory at a few points, the sample replies, and the examples' tables.

use crate::admin_api::Creation;
use crate::private_redis::TopSets;

#[derive(Default)]
pub struct Readings {
    pub load_average: String,
    pub creation: Option<Creation>,
    /// Policy keys `p..` in Redis once the creations were done, and seconds after the first POST.
    pub policies_in_redis: usize,
    pub synced_s: f64,
    pub dbsize: Option<u64>,
    /// Redis `used_memory` before and after the `p..` policies, and after round 1's b.
    pub mem_before: Option<u64>,
    pub mem_after: Option<u64>,
    pub mem_after_load: Option<u64>,
    /// `MEMORY USAGE` of `p1`'s hash: configuration only, then with bucket state.
    pub mem_key_config: Option<u64>,
    pub mem_key_state: Option<u64>,
    /// Redis `used_memory` around round 1's scenario f, and the keyed buckets after it.
    pub mem_before_keyed: Option<u64>,
    pub mem_after_keyed: Option<u64>,
    pub keyed_buckets: usize,
    /// The mean MEMORY USAGE of (up to 1,000) keyed buckets, and how many were measured.
    pub keyed_mean: Option<(f64, usize)>,
    pub top_users: TopSets,
    pub top_few: TopSets,
    pub top_users_api: String,
    /// The server's memory: (point, VmRSS kB, VmHWM kB).
    pub server_memory: Vec<(String, Option<u64>, Option<u64>)>,
    pub sample_granted: String,
    pub sample_denied: (u16, String),
    pub sketch_table: String,
    pub cost_table: String,
}

impl Readings {
    /// Redis bytes per policy between two `used_memory` readings.
    pub fn per_policy(&self, after: Option<u64>, policies: usize) -> Option<f64> {
        let (before, after) = (self.mem_before?, after?);
        Some((after as f64 - before as f64) / policies as f64)
    }

    /// `used_memory`'s growth per keyed bucket during round 1's f.
    pub fn keyed_growth_per_bucket(&self) -> Option<f64> {
        let (before, after) = (self.mem_before_keyed?, self.mem_after_keyed?);
        (self.keyed_buckets > 0).then(|| (after as f64 - before as f64) / self.keyed_buckets as f64)
    }
}

/// kB (as /proc gives them) in MB of 10^6 bytes.
pub fn mb(kb: Option<u64>) -> Option<f64> {
    kb.map(|k| k as f64 * 1024.0 / 1e6)
}
