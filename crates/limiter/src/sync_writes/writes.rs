//! Sync writes: a policy's configuration into its hash, deletions, and the sweep of keys
//! whose policy no longer exists.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{StreamExt, stream};
use redis::ScriptInvocation;

use crate::domain::{Algorithm, Mode, PolicyName, Scope};

use crate::client::{Limiter, LimiterError, StateKey, scripts};
use crate::policy_config::PolicyConfig;

/// How many sync scripts one instance keeps in flight; the multiplexed connection
/// pipelines them, so a reconcile pass over many policies is not one round trip each.
const SYNC_CONCURRENCY: usize = 32;

/// What one reconcile pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PushStats {
    pub written: usize,
    pub unchanged: usize,
    pub failed: usize,
}

impl Limiter {
    /// Sync writes are off the hot path: they get more time than an acquire.
    pub(crate) fn sync_timeout(&self) -> Duration {
        self.timeout.max(Duration::from_secs(1))
    }

    /// Writes one policy's config; `true` when Redis changed.
    #[tracing::instrument(level = "debug", skip_all, fields(policy = %config.name))]
    pub async fn push_policy(&self, config: &PolicyConfig) -> Result<bool, LimiterError> {
        let mut conn = self.conn.clone();
        let invocation = self.sync_invocation(config);
        let fut = invocation.invoke_async::<i64>(&mut conn);
        let written = self.timed_for(self.sync_timeout(), fut).await?;
        Ok(written == 1)
    }

    /// The sync script's call that writes `config` (and, when the algorithm or window
    /// changed, discards the old state).
    pub(crate) fn sync_invocation(&self, config: &PolicyConfig) -> ScriptInvocation<'static> {
        let mut invocation = scripts::SYNC_POLICY.key(self.keys.policy(&config.name));
        // The state keys, so that a change of algorithm or window discards old state.
        for key in self.keys.all_state(&config.name) {
            invocation.key(key);
        }
        let optional = |v: Option<i64>| v.map_or_else(String::new, |v| v.to_string());
        invocation
            .arg(config.created_ms)
            .arg(config.version)
            .arg(config.max_permits)
            // Rust's shortest round-trip form: every instance writes the same string.
            .arg(config.rate.to_string())
            .arg(&config.apps)
            .arg(if config.enabled { "1" } else { "0" })
            // The default algorithm is not stored: 18 bytes less per policy in Redis.
            .arg(match config.algorithm {
                Algorithm::TokenBucket => "",
                other => other.as_str(),
            })
            .arg(optional(config.window_ms))
            .arg(optional(config.lease_ttl_ms))
            // The default scope is not stored either.
            .arg(match config.scope {
                Scope::Global => "",
                other => other.as_str(),
            })
            // Nor the default mode.
            .arg(match config.mode {
                Mode::Enforce => "",
                other => other.as_str(),
            });
        invocation
    }

    /// Writes many policies, a bounded number in flight at once.
    #[tracing::instrument(level = "debug", skip_all, fields(policies = configs.len()))]
    pub async fn push_all(&self, configs: &[Arc<PolicyConfig>]) -> PushStats {
        // Owned references in each future: borrowing closures here make the caller's future
        // not provably `Send` (a known limitation of higher-ranked lifetimes).
        let results: Vec<Result<bool, LimiterError>> = stream::iter(configs.to_vec())
            .map(|config| {
                let limiter = self.clone();
                async move { limiter.push_policy(&config).await }
            })
            .buffer_unordered(SYNC_CONCURRENCY)
            .collect()
            .await;
        let mut stats = PushStats::default();
        for result in results {
            match result {
                Ok(true) => stats.written += 1,
                Ok(false) => stats.unchanged += 1,
                Err(e) => {
                    stats.failed += 1;
                    tracing::warn!(error = %e, "policy push failed");
                }
            }
        }
        stats
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn sync_marker(&self) -> Result<Option<String>, LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.keys.sync_marker());
        let fut = cmd.query_async::<Option<String>>(&mut conn);
        self.timed_for(self.sync_timeout(), fut).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn set_sync_marker(&self, fingerprint: &str) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.keys.sync_marker()).arg(fingerprint);
        let fut = cmd.query_async::<()>(&mut conn);
        self.timed_for(self.sync_timeout(), fut).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(policy = %name))]
    pub async fn delete_policy(&self, name: &PolicyName) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.keys.policy(name));
        for key in self.keys.all_state(name) {
            cmd.arg(key);
        }
        let fut = cmd.query_async::<i64>(&mut conn);
        self.timed_for(self.sync_timeout(), fut).await?;
        Ok(())
    }

    /// Deletes the keys of policies that are not in `known`, unless created at or after
    /// `read_at_ms` (another instance may have just created them). Returns how many went.
    ///
    /// Single-node Redis only: on a cluster, SCAN would have to visit every master, and
    /// deletes are already done at once after each SQL commit.
    #[tracing::instrument(level = "debug", skip_all, fields(known = known.len()))]
    pub async fn sweep_orphans(
        &self,
        known: &HashSet<&str>,
        read_at_ms: i64,
    ) -> Result<usize, LimiterError> {
        if self.conn.is_cluster() {
            return Ok(0);
        }
        let mut conn = self.conn.clone();
        let pattern = escape_glob(&self.keys.policy_pattern());
        let mut cursor: u64 = 0;
        let mut deleted = 0;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000);
            let fut = cmd.query_async::<(u64, Vec<String>)>(&mut conn);
            let (next, keys) = self.timed_for(self.sync_timeout(), fut).await?;
            for key in keys {
                let orphan = self
                    .keys
                    .policy_name_of(&key)
                    .is_some_and(|name| !known.contains(name));
                if orphan {
                    let mut invocation = scripts::DELETE_IF_STALE.key(&key);
                    for state in StateKey::ALL {
                        invocation.key(format!("{key}{}", state.suffix()));
                    }
                    invocation.arg(read_at_ms);
                    let fut = invocation.invoke_async::<i64>(&mut conn);
                    deleted += self.timed_for(self.sync_timeout(), fut).await? as usize;
                }
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }
}

/// Escapes the glob characters of a key prefix, keeping the final `{*}` a wildcard.
fn escape_glob(pattern: &str) -> String {
    let (literal, wildcard) = pattern.split_at(pattern.len() - 2);
    let mut out = String::with_capacity(pattern.len() + 4);
    for c in literal.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push_str(wildcard);
    out
}
