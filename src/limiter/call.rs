//! One acquire as the scripts take it: its keys and arguments, made once and sent either
//! as its algorithm's own script call or as one request of the batch script
//! (`lua/acquire_batch.lua`), which takes the same keys and arguments after a kind.

use rand::Rng;
use redis::ScriptInvocation;

use crate::domain::{Algorithm, AppSlug};

use super::acquire::LeaseId;
use super::{KeyedBucket, Limiter, StateKey, scripts};

/// An acquire ready to be sent.
pub(super) struct AcquireCall {
    algorithm: Algorithm,
    /// The policy's hash (global) or the caller's bucket (keyed).
    key: String,
    /// A global policy's state key beside its hash, for the algorithms that have one.
    state_key: Option<String>,
    permits: i64,
    whose: Whose,
    /// The sliding log's request id, or the concurrency lease (a global script takes the
    /// id, a keyed one the members' prefix `<app>|<id>|`): the argument as the script takes it.
    id: Option<String>,
    /// The lease a grant will be held under (concurrency only).
    pub lease: Option<LeaseId>,
}

/// Whose bucket, with what the script needs beyond the permits.
enum Whose {
    /// A global policy: its config is in its hash; the app is checked there.
    Global { app: AppSlug },
    /// A caller's bucket of a keyed policy: its limits from this instance's snapshot.
    Keyed {
        max_permits: i64,
        param: String,
        enabled: bool,
        version: i64,
    },
}

impl AcquireCall {
    /// An acquire of a global policy with the script of `algorithm` (what this instance
    /// believes it uses; the script answers -4 with the right one if not).
    pub fn global(
        limiter: &Limiter,
        name: &crate::domain::PolicyName,
        algorithm: Algorithm,
        permits: i64,
        app: &AppSlug,
    ) -> Self {
        let (id, lease) = match algorithm {
            Algorithm::Concurrency => {
                let lease = LeaseId::generate();
                (Some(lease.to_string()), Some(lease))
            }
            other => (request_id(other), None),
        };
        Self {
            algorithm,
            key: limiter.keys.policy(name),
            // Only the state key this algorithm's script takes: none for the token bucket,
            // the sliding window and GCRA, whose state lives in the hash.
            state_key: StateKey::of(algorithm).map(|which| limiter.keys.state(name, which)),
            permits,
            whose: Whose::Global { app: app.clone() },
            id,
            lease,
        }
    }

    /// An acquire of `permits` on one caller's bucket; `enabled` false only reads it.
    pub fn keyed(
        limiter: &Limiter,
        bucket: &KeyedBucket<'_>,
        permits: i64,
        enabled: bool,
        app: &AppSlug,
    ) -> Self {
        let algorithm = bucket.policy.algorithm;
        let (id, lease) = match algorithm {
            Algorithm::Concurrency => {
                let lease = LeaseId::generate();
                (Some(format!("{app}|{lease}|")), Some(lease))
            }
            other => (request_id(other), None),
        };
        Self {
            algorithm,
            key: limiter.keyed_key(bucket),
            state_key: None,
            permits,
            whose: Whose::Keyed {
                max_permits: bucket.limits.max_permits,
                param: bucket.limits.param(algorithm),
                enabled,
                version: bucket.policy.version,
            },
            id,
            lease,
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Its algorithm's own script, called for this acquire alone.
    pub fn alone(&self) -> ScriptInvocation<'static> {
        let script = match self.whose {
            Whose::Global { .. } => scripts::acquire_script(self.algorithm),
            Whose::Keyed { .. } => scripts::keyed_acquire_script(self.algorithm),
        };
        let mut invocation = script.prepare_invoke();
        self.add_to(&mut invocation);
        invocation
    }

    /// Adds this acquire to a batch script's call, after its kind: the algorithm's number,
    /// negative for a keyed bucket.
    pub fn add_to_batch(&self, batch: &mut ScriptInvocation<'static>) {
        let kind = match self.whose {
            Whose::Global { .. } => self.algorithm.index(),
            Whose::Keyed { .. } => -self.algorithm.index(),
        };
        batch.arg(kind);
        self.add_to(batch);
    }

    /// The keys and arguments of the single script, in its order.
    fn add_to(&self, invocation: &mut ScriptInvocation<'static>) {
        invocation.key(&self.key);
        if let Some(state_key) = &self.state_key {
            invocation.key(state_key);
        }
        invocation.arg(self.permits);
        match &self.whose {
            Whose::Global { app } => {
                invocation.arg(app.as_str());
            }
            Whose::Keyed {
                max_permits,
                param,
                enabled,
                version,
            } => {
                invocation
                    .arg(max_permits)
                    .arg(param)
                    .arg(if *enabled { "1" } else { "0" })
                    .arg(version);
            }
        }
        if let Some(id) = &self.id {
            invocation.arg(id);
        }
    }
}

/// A sliding log's request id: it makes each grant's log members unique, even within one
/// microsecond. The other algorithms take none (the concurrency lease is made apart).
fn request_id(algorithm: Algorithm) -> Option<String> {
    (algorithm == Algorithm::SlidingLog).then(|| {
        let request: u64 = rand::rng().random();
        format!("{request:016x}")
    })
}
