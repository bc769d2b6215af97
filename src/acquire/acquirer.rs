//! The decision of one acquire, owned in one place: the API key, the local denial cache,
//! one Redis round trip, the counts and metrics, and the failure mode when Redis cannot
//! be reached. The HTTP handler only parses and renders.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::auth::hash_secret;
use crate::domain::{Algorithm, AppSlug, FailureMode, Permits, PolicyName};
use crate::limiter::{AcquireOutcome, Decision, LeaseId, Limiter, LimiterError, ReleaseOutcome};
use crate::snapshot::{KeyEntry, Snapshot};
use crate::telemetry::Metrics;

use super::outcome::{Decided, Outcome, Refusal};
use super::{CachedDenial, DecisionCounts, DenialCache};

/// One HTTP worker's acquire path: it holds that worker's own Redis connection, so an
/// acquire never hops to another thread to reach Redis; the rest is shared.
pub struct Acquirer {
    limiter: Limiter,
    snapshot: Arc<Snapshot>,
    denials: Arc<DenialCache>,
    counts: Arc<DecisionCounts>,
    metrics: Arc<Metrics>,
}

impl Acquirer {
    pub fn new(
        limiter: Limiter,
        snapshot: Arc<Snapshot>,
        denials: Arc<DenialCache>,
        counts: Arc<DecisionCounts>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            limiter,
            snapshot,
            denials,
            counts,
            metrics,
        }
    }

    /// The live API key a client presented, marked as used now (the sync task records
    /// the time in SQL).
    pub fn client(&self, presented: &str) -> Option<Arc<KeyEntry>> {
        let key = self.snapshot.key(&hash_secret(presented))?;
        key.last_used_ms
            .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);
        Some(key)
    }

    /// Decides whether `app` may take `permits` of policy `name` now.
    pub async fn acquire(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        permits: Permits,
    ) -> Result<Outcome, Refusal> {
        let started = Instant::now();
        let brief = self.snapshot.policy(name.as_str());
        if let Some(brief) = brief
            && permits.get() > brief.max_permits
        {
            return Err(Refusal::PermitsAboveMax {
                limit: brief.max_permits,
            });
        }
        let outcome = match self.denials.check(name, app, permits.get()) {
            Some(known) => {
                self.count(name, Decision::Denied);
                Outcome::Decided(known.into())
            }
            None => {
                // A policy not in the snapshot yet (created on another instance a moment
                // ago) is tried as a token bucket; the script redirects to the right one.
                let algorithm = brief.map_or(Algorithm::TokenBucket, |b| b.algorithm);
                match self.limiter.acquire(name, algorithm, permits, app).await {
                    Ok(answer) => self.decided(name, app, permits, answer)?,
                    Err(e) => {
                        let mode = brief.map_or(FailureMode::Closed, |b| b.failure_mode);
                        self.unreachable(name, mode, e)?;
                        Outcome::Degraded {
                            limit: brief.map(|b| b.max_permits),
                        }
                    }
                }
            }
        };
        self.metrics
            .acquire_seconds
            .observe(started.elapsed().as_secs_f64());
        Ok(outcome)
    }

    /// Gives a concurrency lease back.
    pub async fn release(
        &self,
        app: &AppSlug,
        name: &PolicyName,
        lease: LeaseId,
    ) -> Result<ReleaseOutcome, LimiterError> {
        self.limiter.release(name, app, lease).await
    }

    /// What Redis answered, counted, and a denial remembered for the requests after it.
    fn decided(
        &self,
        name: &PolicyName,
        app: &AppSlug,
        permits: Permits,
        answer: AcquireOutcome,
    ) -> Result<Outcome, Refusal> {
        let (decided, algorithm) = match answer {
            AcquireOutcome::Decided {
                decision,
                remaining,
                retry_after_ms,
                reset_after_ms,
                limit,
                version,
                lease,
                algorithm,
            } => (
                Decided {
                    decision,
                    remaining,
                    limit,
                    retry_after_ms,
                    reset_after_ms,
                    version,
                    lease,
                },
                algorithm,
            ),
            AcquireOutcome::NoSuchPolicy => return Err(Refusal::NoSuchPolicy),
            AcquireOutcome::AppNotAllowed => return Err(Refusal::AppNotAllowed),
            AcquireOutcome::PermitsAboveMax { limit } => {
                return Err(Refusal::PermitsAboveMax { limit });
            }
        };
        // A concurrency denial ends when any lease is released, which no retry time
        // foretells: those are never answered locally.
        if decided.decision == Decision::Denied && algorithm != Algorithm::Concurrency {
            self.denials
                .remember(name, app, permits.get(), CachedDenial::from(decided));
        }
        self.count(name, decided.decision);
        Ok(Outcome::Decided(decided))
    }

    /// Redis could not answer: the policy's failure mode decides.
    fn unreachable(
        &self,
        name: &PolicyName,
        mode: FailureMode,
        error: LimiterError,
    ) -> Result<(), Refusal> {
        tracing::warn!(policy = %name, error = %error, ?mode, "acquire could not reach redis");
        self.metrics
            .decisions
            .with_label_values(&[name.as_str(), "degraded"])
            .inc();
        match mode {
            FailureMode::Closed => Err(Refusal::Unavailable),
            FailureMode::Open => Ok(()),
        }
    }

    fn count(&self, name: &PolicyName, decision: Decision) {
        self.counts
            .record(name.as_str(), decision != Decision::Denied);
        let outcome = match decision {
            Decision::Granted => "granted",
            Decision::Denied => "denied",
            Decision::Unenforced => "unenforced",
        };
        self.metrics
            .decisions
            .with_label_values(&[name.as_str(), outcome])
            .inc();
    }
}

impl From<CachedDenial> for Decided {
    fn from(known: CachedDenial) -> Self {
        Self {
            decision: Decision::Denied,
            remaining: known.remaining,
            limit: known.limit,
            retry_after_ms: known.retry_after_ms,
            reset_after_ms: known.reset_after_ms,
            version: known.version,
            lease: None,
        }
    }
}

impl From<Decided> for CachedDenial {
    fn from(d: Decided) -> Self {
        Self {
            remaining: d.remaining,
            limit: d.limit,
            version: d.version,
            retry_after_ms: d.retry_after_ms,
            reset_after_ms: d.reset_after_ms,
        }
    }
}
