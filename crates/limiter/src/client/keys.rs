//! The names of every Redis key and channel of one deployment, in one place.

use crate::domain::{Algorithm, PolicyName};

/// A key of a policy's state beside its hash, for the algorithms that keep one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKey {
    /// The token bucket's tokens and time, packed (`lua/lib/token_bucket_global.lua`).
    TokenBucket,
    /// The fixed window's counter.
    FixedWindow,
    /// The sliding log of grants.
    SlidingLog,
    /// The concurrency leases held.
    Leases,
}

impl StateKey {
    pub const ALL: [StateKey; 4] = [
        Self::TokenBucket,
        Self::FixedWindow,
        Self::SlidingLog,
        Self::Leases,
    ];

    /// What follows the policy's hash key in the state key's name.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::TokenBucket => ":tb",
            Self::FixedWindow => ":fw",
            Self::SlidingLog => ":log",
            Self::Leases => ":leases",
        }
    }

    /// The state key an algorithm's acquire script takes beside the hash, if any (the
    /// sliding window and GCRA keep their state in the hash itself).
    pub fn of(algorithm: Algorithm) -> Option<Self> {
        match algorithm {
            Algorithm::TokenBucket => Some(Self::TokenBucket),
            Algorithm::FixedWindow => Some(Self::FixedWindow),
            Algorithm::SlidingLog => Some(Self::SlidingLog),
            Algorithm::Concurrency => Some(Self::Leases),
            Algorithm::SlidingWindow | Algorithm::Gcra => None,
        }
    }
}

/// Names of the Redis keys of one deployment.
#[derive(Debug, Clone)]
pub struct KeySpace {
    prefix: String,
}

impl KeySpace {
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>:{<name>}`: the braces are a Redis Cluster hash tag, so every key a
    /// policy ever needs lands in one slot.
    pub fn policy(&self, name: &PolicyName) -> String {
        joined(&[&self.prefix, ":{", name.as_str(), "}"])
    }

    /// One state key of a policy: same hash tag as its hash, so a script may take both
    /// on a Redis Cluster.
    pub fn state(&self, name: &PolicyName, which: StateKey) -> String {
        joined(&[&self.prefix, ":{", name.as_str(), "}", which.suffix()])
    }

    /// Every state key a policy may have (to discard its state, or read any algorithm's).
    pub fn all_state(&self, name: &PolicyName) -> [String; 4] {
        StateKey::ALL.map(|which| self.state(name, which))
    }

    /// A keyed policy's bucket of one caller, named by its tag (see `limiter::keyed`).
    /// The braces make the whole tag the hash tag: one policy's buckets spread over all of
    /// a cluster's slots.
    pub fn keyed_bucket(&self, tag: &str) -> String {
        joined(&[&self.prefix, ":k:{", tag, "}"])
    }

    /// The marker the sync task leaves after a complete pass: the SQL fingerprint that
    /// Redis then mirrored. Gone after a flush or a restart, which forces a full pass.
    pub fn sync_marker(&self) -> String {
        format!("{}:sync", self.prefix)
    }

    /// The granted/denied counts of one policy per minute of one Unix hour (see
    /// `limiter::usage`). The policy's hash tag: on a cluster its counts live beside its
    /// bucket.
    pub fn usage_minutes(&self, policy: &str, hour: i64) -> String {
        self.activity("", policy, "m", hour)
    }

    /// The counts of all the policies of one application per minute of one Unix hour,
    /// for the applications list.
    pub fn usage_app_minutes(&self, app: &str, hour: i64) -> String {
        self.activity("app:", app, "m", hour)
    }

    /// The would-be denials of an application's shadow policies per minute of one Unix
    /// hour (one u32 a minute; they are also in its granted counts, as they were granted),
    /// written only for applications that had some.
    pub fn usage_app_shadow_minutes(&self, app: &str, hour: i64) -> String {
        self.activity("app:", app, "sm", hour)
    }

    /// The same per hour of one Unix day.
    pub fn usage_hours(&self, policy: &str, day: i64) -> String {
        self.activity("", policy, "h", day)
    }

    /// A shadow policy's would-have-denied counts per minute of one Unix hour (one u32 a
    /// minute): kept apart from [`Self::usage_minutes`], so a chart tells them from real
    /// denials, and written only for policies that had some.
    pub fn usage_shadow_minutes(&self, policy: &str, hour: i64) -> String {
        self.activity("", policy, "sm", hour)
    }

    /// A fail-closed policy's acquires refused (503) because Redis could not be reached,
    /// per minute of one Unix hour (one u32 a minute), written by the first flush that
    /// reaches Redis again, only for policies that had some.
    pub fn usage_unavailable_minutes(&self, policy: &str, hour: i64) -> String {
        self.activity("", policy, "um", hour)
    }

    /// The same per hour of one Unix day, for the week's chart.
    pub fn usage_unavailable_hours(&self, policy: &str, day: i64) -> String {
        self.activity("", policy, "uh", day)
    }

    /// The same summed over an application's policies.
    pub fn usage_app_unavailable_minutes(&self, app: &str, hour: i64) -> String {
        self.activity("app:", app, "um", hour)
    }

    /// An application's acquires with a revoked or expired key (401) per minute of one
    /// Unix hour (one u32 a minute), written only for applications that had some.
    pub fn usage_app_unauthenticated_minutes(&self, app: &str, hour: i64) -> String {
        self.activity("app:", app, "ua", hour)
    }

    /// An application's acquires that named no policy (404) per minute of one Unix hour
    /// (one u32 a minute), written only for applications that had some.
    pub fn usage_app_unknown_minutes(&self, app: &str, hour: i64) -> String {
        self.activity("app:", app, "nm", hour)
    }

    /// The same per hour of one Unix day.
    pub fn usage_shadow_hours(&self, policy: &str, day: i64) -> String {
        self.activity("", policy, "sh", day)
    }

    /// The API keys just created, until every instance has reloaded its keys (see
    /// `sync_writes::new_keys`). Outside the policy pattern, as the sync marker.
    pub fn new_keys(&self) -> String {
        format!("{}:new_keys", self.prefix)
    }

    /// The episodes webhooks report (see `counts::episodes`): the open ones, when each
    /// began, and the policies near their limit. One hash tag: one script takes all three
    /// on a cluster.
    pub fn episodes(&self) -> [String; 3] {
        ["episodes", "episode_starts", "near_limit"]
            .map(|k| format!("{}:{{notify}}:{k}", self.prefix))
    }

    /// The pub/sub channel on which instances announce changes to each other.
    pub fn changes_channel(&self) -> String {
        format!("{}:changes", self.prefix)
    }

    /// The pattern that matches every policy key of this deployment, for SCAN.
    pub fn policy_pattern(&self) -> String {
        format!("{}:{{*}}", self.prefix)
    }

    /// The policy name inside a key made by [`KeySpace::policy`], if it is one.
    pub fn policy_name_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(self.prefix.as_str())?
            .strip_prefix(":{")?
            .strip_suffix('}')
    }

    /// `<prefix>:activity:<of>{<tag>}:<kind>:<period>`: the counts of a policy (`of` "")
    /// or of an application (`of` "app:") per minute of an hour or per hour of a day.
    fn activity(&self, of: &str, tag: &str, kind: &str, period: i64) -> String {
        let mut number = itoa::Buffer::new();
        joined(&[
            &self.prefix,
            ":activity:",
            of,
            "{",
            tag,
            "}:",
            kind,
            ":",
            number.format(period),
        ])
    }
}

/// `parts` joined in one allocation of the final length. Keys are built on every acquire
/// and by the hundred for a console page, where format!'s machinery costs more than the
/// copying.
fn joined(parts: &[&str]) -> String {
    let mut key = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        key.push_str(part);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_keys_round_trip() {
        let keys = KeySpace::new("rk");
        let name = PolicyName::parse("orders.create").unwrap();
        let key = keys.policy(&name);
        assert_eq!(key, "rk:{orders.create}");
        assert_eq!(keys.policy_name_of(&key), Some("orders.create"));
        assert_eq!(keys.policy_name_of("other:{x}"), None);
        assert_eq!(
            keys.state(&name, StateKey::Leases),
            "rk:{orders.create}:leases"
        );
    }
    #[test]
    fn every_kind_of_key_is_named_as_the_scripts_expect() {
        let keys = KeySpace::new("rk");
        for (built, expected) in [
            (keys.keyed_bucket("p\u{1}42"), "rk:k:{p\u{1}42}"),
            (
                keys.usage_minutes("p", 29_000_000),
                "rk:activity:{p}:m:29000000",
            ),
            (keys.usage_hours("p", -1), "rk:activity:{p}:h:-1"),
            (keys.usage_shadow_minutes("p", 7), "rk:activity:{p}:sm:7"),
            (keys.usage_shadow_hours("p", 7), "rk:activity:{p}:sh:7"),
            (
                keys.usage_unavailable_minutes("p", 7),
                "rk:activity:{p}:um:7",
            ),
            (keys.usage_unavailable_hours("p", 7), "rk:activity:{p}:uh:7"),
            (
                keys.usage_app_minutes("shop", 7),
                "rk:activity:app:{shop}:m:7",
            ),
            (
                keys.usage_app_shadow_minutes("shop", 7),
                "rk:activity:app:{shop}:sm:7",
            ),
            (
                keys.usage_app_unavailable_minutes("shop", 7),
                "rk:activity:app:{shop}:um:7",
            ),
            (
                keys.usage_app_unauthenticated_minutes("shop", 7),
                "rk:activity:app:{shop}:ua:7",
            ),
            (
                keys.usage_app_unknown_minutes("shop", 7),
                "rk:activity:app:{shop}:nm:7",
            ),
        ] {
            assert_eq!(built, expected);
        }
    }
}
