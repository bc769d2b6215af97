//! The decision of one acquire, owned in one place: the API key, whose bucket (the
//! policy's, or the caller's own for a keyed policy, with its override), the local denial
//! cache, one Redis round trip, the counts and metrics, and the failure mode when Redis
//! cannot be reached. The HTTP handler only parses and renders.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use prometheus::IntCounter;

use crate::auth::digest_secret;
use crate::domain::{Algorithm, AppSlug, CallerKey, FailureMode, Mode, Permits, PolicyName};
use crate::snapshot::{KeyEntry, PolicyEntry, Snapshot};
use crate::telemetry::Metrics;
use ratekeeper_limiter::{
    AcquireOutcome, Batcher, Decided, Decision, KeyedBucket, LeaseId, Limiter, LimiterError,
    ReleaseOutcome,
};

use super::caller::{Partition, partition_of};
use super::outcome::{Acquired, KeyRefused, Outcome, Refusal};
use super::{DenialCache, Protocol, Tally};

/// One HTTP worker's acquire path: it holds that worker's own Redis connection, so an
/// acquire never hops to another thread to reach Redis; the rest is shared.
pub struct Acquirer {
    pub(super) limiter: Limiter,
    /// Global token-bucket acquires, batched on this worker's connection.
    pub(super) batcher: Batcher,
    pub(super) snapshot: Arc<Snapshot>,
    pub(super) denials: Arc<DenialCache>,
    pub(super) metrics: Arc<Metrics>,
    /// This worker's own counts and top callers (no lock shared with other workers).
    pub(super) tally: Arc<Tally>,
    /// Warnings of an outage, at most one a second (not one per request).
    pub(super) outage_log: OncePerSecond,
    /// `ratekeeper_decisions_total` by outcome, looked up once.
    pub(super) outcomes: OutcomeCounters,
}

/// The decision counters by outcome, resolved when the acquirer is made: a label lookup
/// per acquire would hash the label and take the metric family's lock every time.
/// Outcomes are decisions only, never request input (a resource name as a label would let
/// any client grow the metrics without bound); per-policy counts are the decision counts,
/// in Redis, for the console.
pub(super) struct OutcomeCounters {
    pub(super) granted: IntCounter,
    pub(super) denied: IntCounter,
    pub(super) unenforced: IntCounter,
    pub(super) shadow_denied: IntCounter,
    pub(super) degraded: IntCounter,
    pub(super) unavailable: IntCounter,
}

impl OutcomeCounters {
    fn of(metrics: &Metrics, protocol: Protocol) -> Self {
        let counter = |outcome: &str| {
            metrics
                .decisions
                .with_label_values(&[protocol.label(), outcome])
        };
        Self {
            granted: counter("granted"),
            denied: counter("denied"),
            unenforced: counter("unenforced"),
            shadow_denied: counter("shadow_denied"),
            degraded: counter("degraded"),
            unavailable: counter("unavailable"),
        }
    }
}

/// A gate that opens at most once a second, without a lock.
#[derive(Default)]
pub(super) struct OncePerSecond(AtomicI64);

impl OncePerSecond {
    pub(super) fn due(&self) -> bool {
        let now = chrono::Utc::now().timestamp();
        let last = self.0.load(Ordering::Relaxed);
        now > last
            && self
                .0
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

impl Acquirer {
    pub fn new(
        limiter: Limiter,
        snapshot: Arc<Snapshot>,
        denials: Arc<DenialCache>,
        metrics: Arc<Metrics>,
        tally: Arc<Tally>,
        protocol: Protocol,
    ) -> Self {
        Self {
            outcomes: OutcomeCounters::of(&metrics, protocol),
            batcher: Batcher::with_figures(limiter.clone(), metrics.batch.clone()),
            limiter,
            snapshot,
            denials,
            metrics,
            tally,
            outage_log: OncePerSecond::default(),
        }
    }

    /// The live API key a client presented, marked as used now (the sync task records
    /// the time in SQL). An expired key is refused with when it expired.
    pub fn client(&self, presented: &str) -> Result<Arc<KeyEntry>, KeyRefused> {
        let key = self
            .snapshot
            .key(&digest_secret(presented))
            .ok_or(KeyRefused::Unknown)?;
        if key.revoked {
            self.tally.count_unauthenticated(key.app.as_str());
            return Err(KeyRefused::Revoked);
        }
        let now = chrono::Utc::now().timestamp_millis();
        if let Some(at) = key.expires_ms.filter(|_| key.expired_at(now)) {
            self.tally.count_unauthenticated(key.app.as_str());
            return Err(KeyRefused::Expired { at_ms: at });
        }
        // Written at most once a second (the flush reads it every few seconds): a write per
        // request would move the entry's cache line between the workers' cores each time.
        if now - key.last_used_ms.load(Ordering::Relaxed) >= 1000 {
            key.last_used_ms.store(now, Ordering::Relaxed);
        }
        Ok(key)
    }

    /// Decides whether `app` may take `permits` of policy `name` now (of the bucket of
    /// `key`, for a per_key policy). Its time is observed whatever the answer: a refusal
    /// (503 in an outage, 404, 403, 422) takes time too.
    pub async fn acquire(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
        key: Option<CallerKey>,
    ) -> Result<Acquired, Refusal> {
        let started = Instant::now();
        let answer = self.decide(app, name, permits, key).await;
        if matches!(answer, Err(Refusal::NoSuchPolicy)) {
            self.tally.count_unknown_policy(app.as_str());
        }
        self.metrics
            .acquire_seconds
            .observe(started.elapsed().as_secs_f64());
        answer
    }

    async fn decide(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
        key: Option<CallerKey>,
    ) -> Result<Acquired, Refusal> {
        let policy = self.snapshot.policy(name.as_str());
        let partition = partition_of(policy.as_deref(), app, key)?;
        if let Some(policy) = policy.as_deref().filter(|p| p.blocks()) {
            let outcome = self.blocked(app, name, permits.get(), policy, partition.as_ref())?;
            return Ok(Acquired { outcome, partition });
        }
        let outcome = match (&partition, policy.as_deref()) {
            (Some(partition), Some(policy)) => {
                self.keyed(app, name, permits, policy, partition).await?
            }
            _ => self.global(app, name, permits, policy.as_deref()).await?,
        };
        Ok(Acquired { outcome, partition })
    }

    /// One bucket for every allowed app, decided by Redis on the policy's hash.
    async fn global(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
        policy: Option<&PolicyEntry>,
    ) -> Result<Outcome, Refusal> {
        if let Some(policy) = policy
            && permits.get() > policy.max_permits()
        {
            return Err(Refusal::PermitsAboveMax {
                limit: policy.max_permits(),
            });
        }
        // Denials are remembered per app: another app may not be allowed at all (403).
        let generation = self.denials.generation();
        let version = policy.map(PolicyEntry::version);
        if let Some(known) = self
            .denials
            .check(name, app.as_str(), permits.get(), version)
        {
            return Ok(self.known_denial(name, app.as_str(), known));
        }
        match self.ask_redis(app, name, permits, policy).await {
            Ok(answer) => self.decided(name, app.as_str(), permits, answer, generation),
            Err(e) => self.without_redis(app, name, policy, e),
        }
    }

    /// The caller's own bucket: the app check and the limits (an override's, or the
    /// policy's) from the snapshot, the decision by Redis on that bucket alone.
    async fn keyed(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
        policy: &PolicyEntry,
        partition: &Partition,
    ) -> Result<Outcome, Refusal> {
        if !policy.allows(app) {
            return Err(Refusal::AppNotAllowed);
        }
        let caller = partition.as_str();
        let limits = policy.limits_for(caller);
        if permits.get() > limits.max_permits {
            return Err(Refusal::PermitsAboveMax {
                limit: limits.max_permits,
            });
        }
        let generation = self.denials.generation();
        let version = Some(policy.version());
        if let Some(known) = self.denials.check(name, caller, permits.get(), version) {
            return Ok(self.known_denial(name, caller, known));
        }
        let bucket = KeyedBucket {
            policy: &policy.config,
            caller,
            limits,
        };
        match self.batcher.acquire_keyed(&bucket, permits, app).await {
            Ok(answer) => self.decided(name, caller, permits, answer, generation),
            Err(e) => self.without_redis(app, name, Some(policy), e),
        }
    }

    /// One round trip, or three when Redis has lost a policy this instance knows: then it
    /// is put back from the snapshot and decided on at once, not answered 404 until the
    /// next sync pass.
    pub(super) async fn ask_redis(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
        policy: Option<&PolicyEntry>,
    ) -> Result<AcquireOutcome, LimiterError> {
        // A policy not in the snapshot yet (created on another instance a moment ago) is
        // tried as a token bucket; the script redirects to the right one.
        let algorithm = policy.map_or(Algorithm::TokenBucket, PolicyEntry::algorithm);
        let config = policy.map(|policy| &*policy.config);
        let answer = self
            .batcher
            .acquire(name, algorithm, permits, app, config)
            .await?;
        match (answer, policy) {
            (AcquireOutcome::NoSuchPolicy, Some(policy)) => {
                tracing::warn!(policy = %name, "redis had lost the policy; restoring it");
                self.batcher.restore(&policy.config).await?;
                self.batcher
                    .acquire(name, policy.algorithm(), permits, app, config)
                    .await
            }
            (answer, _) => Ok(answer),
        }
    }

    /// Gives a concurrency lease back (from the bucket of `key`, for a per_key policy).
    pub async fn release(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        lease: LeaseId,
        key: Option<CallerKey>,
    ) -> Result<ReleaseOutcome, Refusal> {
        let policy = self.snapshot.policy(name.as_str());
        let partition = partition_of(policy.as_deref(), app, key)?;
        let released = match (&partition, policy.as_deref()) {
            (Some(partition), Some(policy)) => {
                if policy.algorithm() != Algorithm::Concurrency {
                    return Ok(ReleaseOutcome::NotLeased(policy.algorithm()));
                }
                let bucket = KeyedBucket {
                    policy: &policy.config,
                    caller: partition.as_str(),
                    limits: policy.limits_for(partition.as_str()),
                };
                self.limiter.release_keyed(&bucket, app, lease).await
            }
            _ => self.limiter.release(name, app, lease).await,
        };
        released.map_err(|e| {
            tracing::warn!(policy = %name, error = %e, "release could not reach redis");
            Refusal::Unavailable
        })
    }

    /// What Redis answered, counted, and a denial remembered for the requests after it
    /// (per `caller`: the app of a global policy, the caller of a keyed bucket), unless a
    /// change was heard of since the denial cache's `generation` was read.
    pub(super) fn decided(
        &self,
        name: &PolicyName,
        caller: &str,
        permits: Permits,
        answer: AcquireOutcome,
        generation: u64,
    ) -> Result<Outcome, Refusal> {
        let decided = match answer {
            AcquireOutcome::Decided(decided) => decided,
            AcquireOutcome::NoSuchPolicy => return Err(Refusal::NoSuchPolicy),
            AcquireOutcome::AppNotAllowed => return Err(Refusal::AppNotAllowed),
            AcquireOutcome::PermitsAboveMax { limit } => {
                return Err(Refusal::PermitsAboveMax { limit });
            }
        };
        // A concurrency denial ends when any lease is released, which no retry time
        // foretells: those are never answered locally. A shadow policy's would-be denial
        // is remembered like a denial, so it is answered and counted the same way.
        let denial = matches!(decided.decision, Decision::Denied | Decision::ShadowDenied);
        if denial && decided.algorithm != Algorithm::Concurrency {
            self.denials
                .remember(name, caller, permits.get(), decided, generation);
        }
        self.count(name, caller, decided.decision);
        Ok(Outcome::Decided(decided))
    }

    /// A denial this instance still knows, answered and counted without Redis.
    fn known_denial(&self, name: &PolicyName, caller: &str, known: Decided) -> Outcome {
        self.count(name, caller, known.decision);
        Outcome::Decided(known)
    }

    /// Redis could not answer: every check that needs no Redis is made from the snapshot
    /// (the app allowed, the policy enabled), and only then the failure mode decides (a
    /// shadow policy grants, whatever its failure mode). A policy this instance does not
    /// know fails closed.
    fn without_redis(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        policy: Option<&PolicyEntry>,
        error: LimiterError,
    ) -> Result<Outcome, Refusal> {
        self.log_outage(name, &error);
        let outcome = fallback(app, policy);
        match outcome {
            Ok(_) => {
                self.tally.count(name.as_str(), Decision::Granted);
                self.outcomes.degraded.inc();
            }
            Err(Refusal::Unavailable) => {
                self.tally.count_unavailable(name.as_str());
                self.outcomes.unavailable.inc();
            }
            Err(_) => {}
        }
        outcome
    }

    /// A warning that Redis could not answer, at most once a second.
    pub(super) fn log_outage(&self, name: &PolicyName, error: &LimiterError) {
        if self.outage_log.due() {
            tracing::warn!(
                policy = %name,
                redis = self.limiter.address(),
                error = %error,
                "acquire could not reach redis (logged at most once a second)"
            );
        }
    }

    /// Counts a decision: per policy for the console's chart, per caller for the top
    /// callers, and by outcome for the metrics.
    pub(super) fn count(&self, name: &PolicyName, caller: &str, decision: Decision) {
        self.tally.record(name.as_str(), caller, decision);
        let counter = match decision {
            Decision::Granted => &self.outcomes.granted,
            Decision::Denied | Decision::Blocked => &self.outcomes.denied,
            Decision::Unenforced => &self.outcomes.unenforced,
            Decision::ShadowDenied => &self.outcomes.shadow_denied,
        };
        counter.inc();
    }
}

/// What an acquire of `policy` by `app` comes to when Redis cannot answer: every check that
/// needs no Redis is made from the snapshot (the app allowed, the policy enabled), and only
/// then the failure mode decides (a shadow policy grants, whatever its failure mode). A
/// policy this instance does not know fails closed.
pub(super) fn fallback(app: &AppSlug, policy: Option<&PolicyEntry>) -> Result<Outcome, Refusal> {
    match policy {
        None => Err(Refusal::Unavailable),
        Some(policy) if !policy.allows(app) => Err(Refusal::AppNotAllowed),
        Some(policy) if !policy.config.enabled => Ok(Outcome::Degraded {
            limit: Some(policy.max_permits()),
            enforced: false,
        }),
        // Shadow mode promises never to refuse: granted, whatever the failure mode.
        Some(policy) if policy.config.mode == Mode::Shadow => Ok(Outcome::Degraded {
            limit: Some(policy.max_permits()),
            enforced: true,
        }),
        Some(policy) => match policy.failure_mode {
            FailureMode::Closed => Err(Refusal::Unavailable),
            FailureMode::Open => Ok(Outcome::Degraded {
                limit: Some(policy.max_permits()),
                enforced: true,
            }),
        },
    }
}
