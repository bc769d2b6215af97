use crate::domain::PolicyName;

/// The state keys of one policy (see [`KeySpace::state_keys`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateKeys {
    pub fixed_window: String,
    pub sliding_log: String,
    pub leases: String,
}

impl StateKeys {
    pub fn all(&self) -> [&str; 3] {
        [&self.fixed_window, &self.sliding_log, &self.leases]
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
        format!("{}:{{{}}}", self.prefix, name)
    }

    /// The keys of a policy's state beside its hash, one per algorithm that keeps one:
    /// the fixed window's counter, the sliding log, the concurrency leases. Same hash tag,
    /// so a script may take them with the hash on a Redis Cluster.
    pub fn state_keys(&self, name: &PolicyName) -> StateKeys {
        let hash = self.policy(name);
        StateKeys {
            fixed_window: format!("{hash}:fw"),
            sliding_log: format!("{hash}:log"),
            leases: format!("{hash}:leases"),
        }
    }

    /// The marker the sync task leaves after a complete pass: the SQL fingerprint that
    /// Redis then mirrored. Gone after a flush or a restart, which forces a full pass.
    pub fn sync_marker(&self) -> String {
        format!("{}:sync", self.prefix)
    }

    /// The granted/denied counts of one policy in one Unix minute. The policy's hash tag:
    /// on a cluster its counts live beside its bucket.
    pub fn minute_counts(&self, policy: &str, minute: i64) -> String {
        format!("{}:activity:{{{policy}}}:{minute}", self.prefix)
    }

    /// The pub/sub channel on which instances announce changes to each other.
    pub fn changes_channel(&self) -> String {
        format!("{}:changes", self.prefix)
    }

    /// A bucket of ratekeeper's own, such as sign-in attempts per user: outside the
    /// policy pattern, so the orphan sweep never takes it for a deleted policy.
    pub fn own_bucket(&self, name: &str) -> String {
        format!("{}:own:{{{}}}", self.prefix, name)
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
    }
}
