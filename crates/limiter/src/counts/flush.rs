//! The flusher's write: one instance's counts and top callers of a minute, one script call
//! per [`POLICIES_PER_CALL`] busy policies (`lua/flush_policies.lua`: each one's usage
//! pairs, shadow counts and top callers together, expiries set once per key; on a cluster
//! one call per policy, in its slot), and each owning application's pair of the minute.

use futures_util::future::join_all;

use crate::client::{KeySpace, Limiter, LimiterError, scripts};

/// The name of a usage string of one application and hour (see `KeySpace`).
type UsageKey = fn(&KeySpace, &str, i64) -> String;

use super::top_keys::{KEEP, KEEP_MS, TopBatch};
use super::usage::{KEEP_HOURS_MS, KEEP_MINUTES_MS, add_counts};

/// The most policies one flush call takes: a call's fixed cost (the script's start, its
/// round) shared by many, while no call holds Redis long (some 10 µs a policy).
const POLICIES_PER_CALL: usize = 32;

/// One instance's decisions on the policies of one application over a flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppFlush {
    pub app: String,
    /// Every grant, shadow mode's would-be denials included (they were granted).
    pub granted: u64,
    pub denied: u64,
    /// Of `granted`, those a shadow policy would have denied.
    pub shadow_denied: u64,
    /// Refused (503) for want of Redis, not in the others.
    pub unavailable: u64,
    /// Acquires that named no policy (404), not in the others.
    pub unknown_policy: u64,
    /// Acquires with a revoked or expired key of the application (401), not in the others.
    pub unauthenticated: u64,
}

/// One instance's decisions on one policy over a flush: its counts and its top callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyFlush<'a> {
    pub granted: u64,
    pub denied: u64,
    /// Granted by a shadow policy that would have denied them.
    pub shadow_denied: u64,
    /// Refused (503) for want of Redis: no decision, so neither counted nor followed.
    pub unavailable: u64,
    pub top: TopBatch<'a>,
}

impl Limiter {
    /// Adds one instance's decisions of `minute`: per policy to the minute's slot of its
    /// hour, the hour's slot of its day and the minute's top callers; and the same counts
    /// summed per owning application (`apps`) to the application's minutes. One pipeline
    /// (on a cluster, one per policy and one per application, each in its slot).
    #[tracing::instrument(level = "debug", skip_all, fields(minute = minute, policies = policies.len()))]
    pub async fn add_flush(
        &self,
        minute: i64,
        policies: &[PolicyFlush<'_>],
        apps: &[AppFlush],
    ) -> Result<(), LimiterError> {
        if self.conn.is_cluster() {
            // A pipeline stays in one slot: one per policy, and one per application (whose
            // keys carry its own tag).
            let sent = policies
                .iter()
                .map(|p| self.send_flush(minute, std::slice::from_ref(p), &[]))
                .chain(
                    apps.iter()
                        .map(|a| self.send_flush(minute, &[], std::slice::from_ref(a))),
                );
            return join_all(sent).await.into_iter().collect();
        }
        self.send_flush(minute, policies, apps).await
    }

    /// One pipeline: the script loaded (a flushed script cache is no error), one call per
    /// [`POLICIES_PER_CALL`] policies, the applications' pairs; nothing at all when there is
    /// nothing to add.
    async fn send_flush(
        &self,
        minute: i64,
        policies: &[PolicyFlush<'_>],
        apps: &[AppFlush],
    ) -> Result<(), LimiterError> {
        if policies.is_empty() && apps.is_empty() {
            return Ok(());
        }
        let (hour, day) = (minute.div_euclid(60), minute.div_euclid(24 * 60));
        let minute_slot = 2 * minute.rem_euclid(60);
        let mut pipe = redis::pipe();
        if !policies.is_empty() {
            pipe.load_script(&scripts::FLUSH_POLICIES).ignore();
        }
        for some in policies.chunks(POLICIES_PER_CALL) {
            pipe.invoke_script(&self.flush_invocation(minute, hour, day, some))
                .ignore();
        }
        // Refusals are rare (an outage): one counter a minute and one an hour each, beside
        // the script's writes.
        for p in policies.iter().filter(|p| p.unavailable > 0) {
            let policy = p.top.policy;
            for (key, slot, keep_ms) in [
                (
                    self.keys.usage_unavailable_minutes(policy, hour),
                    minute.rem_euclid(60),
                    KEEP_MINUTES_MS,
                ),
                (
                    self.keys.usage_unavailable_hours(policy, day),
                    hour.rem_euclid(24),
                    KEEP_HOURS_MS,
                ),
            ] {
                add_counts(&mut pipe, &key, slot, &[saturated(p.unavailable)], keep_ms);
            }
        }
        for app in apps {
            add_counts(
                &mut pipe,
                &self.keys.usage_app_minutes(&app.app, hour),
                minute_slot,
                &[saturated(app.granted), saturated(app.denied)],
                KEEP_MINUTES_MS,
            );
            // The rarer counts, one u32 a minute each, only when there are some.
            let one_a_minute: [(u64, UsageKey); 4] = [
                (app.shadow_denied, KeySpace::usage_app_shadow_minutes),
                (app.unavailable, KeySpace::usage_app_unavailable_minutes),
                (app.unknown_policy, KeySpace::usage_app_unknown_minutes),
                (
                    app.unauthenticated,
                    KeySpace::usage_app_unauthenticated_minutes,
                ),
            ];
            for (n, key_of) in one_a_minute.into_iter().filter(|(n, _)| *n > 0) {
                add_counts(
                    &mut pipe,
                    &key_of(&self.keys, &app.app, hour),
                    minute.rem_euclid(60),
                    &[saturated(n)],
                    KEEP_MINUTES_MS,
                );
            }
        }
        let mut conn = self.conn.clone();
        self.timed(pipe.query_async::<()>(&mut conn)).await
    }

    /// `lua/flush_policies.lua`'s call for `policies` (their keys and arguments in the
    /// order the script's header gives).
    fn flush_invocation(
        &self,
        minute: i64,
        hour: i64,
        day: i64,
        policies: &[PolicyFlush<'_>],
    ) -> redis::ScriptInvocation<'static> {
        let mut call = scripts::FLUSH_POLICIES.prepare_invoke();
        call.arg(2 * minute.rem_euclid(60))
            .arg(2 * hour.rem_euclid(24))
            .arg(KEEP_MINUTES_MS)
            .arg(KEEP_HOURS_MS)
            .arg(KEEP_MS)
            .arg(KEEP);
        for p in policies {
            let policy = p.top.policy;
            call.key(self.keys.usage_minutes(policy, hour))
                .key(self.keys.usage_hours(policy, day))
                .key(self.keys.usage_shadow_minutes(policy, hour))
                .key(self.keys.usage_shadow_hours(policy, day))
                .key(self.top_key(policy, minute, 'g'))
                .key(self.top_key(policy, minute, 'd'))
                .key(self.top_key(policy, minute, 's'))
                .arg(saturated(p.granted))
                .arg(saturated(p.denied))
                .arg(saturated(p.shadow_denied))
                .arg(p.top.granted.len())
                .arg(p.top.denied.len())
                .arg(p.top.shadow_denied.len());
            for (caller, n) in p
                .top
                .granted
                .iter()
                .chain(p.top.denied)
                .chain(p.top.shadow_denied)
            {
                call.arg(caller.as_str()).arg(*n);
            }
        }
        call
    }
}

/// A count in a u32 slot: past 4 billion in a minute it stays at the maximum.
fn saturated(n: u64) -> u64 {
    n.min(u64::from(u32::MAX))
}
