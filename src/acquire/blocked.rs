//! Policies in mode `block` (a blocklist entry, an incident brake): every acquire is denied
//! by the instance from its snapshot, without a Redis round trip. The checks an acquire
//! makes before any decision still come first (the app allowed, the permits within the
//! capacity), so a blocked policy refuses what it would refuse enforced.

use ratekeeper_limiter::{Decided, Decision};

use crate::domain::{AppSlug, PolicyName};
use crate::snapshot::PolicyEntry;

use super::Acquirer;
use super::caller::Partition;
use super::outcome::{Outcome, Refusal};

/// The wait a blocked policy's denial names: the block lasts until an owner lifts it,
/// which no time foretells, so a client is told to ask again soon rather than never.
pub const BLOCKED_RETRY_AFTER_MS: i64 = 1_000;

/// The denial of a blocked policy for the bucket of `partition` (the policy's own when
/// `None`): nothing remaining, the capacity the bucket would have.
pub(super) fn blocked_denial(policy: &PolicyEntry, partition: Option<&Partition>) -> Decided {
    let limit = match partition {
        Some(partition) => policy.limits_for(partition.as_str()).max_permits,
        None => policy.max_permits(),
    };
    Decided {
        decision: Decision::Blocked,
        remaining: 0,
        retry_after_ms: BLOCKED_RETRY_AFTER_MS,
        reset_after_ms: BLOCKED_RETRY_AFTER_MS,
        limit,
        version: policy.version(),
        lease: None,
        algorithm: policy.algorithm(),
    }
}

/// Whether `app` may ask a blocked policy at all: what Redis would answer for an enforced
/// global policy (a keyed one is checked from the snapshot on every path).
pub(super) fn check_blocked(
    policy: &PolicyEntry,
    app: &AppSlug,
    permits: i64,
    partition: Option<&Partition>,
) -> Result<(), Refusal> {
    if !policy.allows(app) {
        return Err(Refusal::AppNotAllowed);
    }
    let limit = match partition {
        Some(partition) => policy.limits_for(partition.as_str()).max_permits,
        None => policy.max_permits(),
    };
    if permits > limit {
        return Err(Refusal::PermitsAboveMax { limit });
    }
    Ok(())
}

impl Acquirer {
    /// A single acquire of a blocked policy: refused as an enforced one would be, else
    /// denied and counted as a denial.
    pub(super) fn blocked(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: i64,
        policy: &PolicyEntry,
        partition: Option<&Partition>,
    ) -> Result<Outcome, Refusal> {
        check_blocked(policy, app, permits, partition)?;
        let caller = partition.map_or(app.as_str(), Partition::as_str);
        let denial = blocked_denial(policy, partition);
        self.count(name, caller, denial.decision);
        Ok(Outcome::Decided(denial))
    }
}
