//! Keeps Redis a faithful copy of the SQL store: a push right after each commit
//! (write-through), and a reconcile pass on an interval that repairs whatever a push
//! missed, a Redis restart or flush lost, or another instance left behind.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::denials::DenialCache;
use crate::domain::PolicyName;
use crate::limiter::{Limiter, PolicyConfig};
use crate::snapshot::Snapshot;
use crate::store::{PolicyRecord, Store, StoreResult, now_ms};
use crate::telemetry::METRICS;

/// Keys of deleted policies are swept only when their incarnation is older than this,
/// so a policy another instance created (and pushed) while we read SQL is never taken.
const SWEEP_GRACE_MS: i64 = 60_000;

#[derive(Clone)]
pub struct Sync {
    store: Store,
    limiter: Limiter,
    snapshot: Arc<Snapshot>,
    denials: Arc<DenialCache>,
}

/// What one reconcile pass found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileReport {
    pub policies: usize,
    pub rewritten: usize,
    pub failed: usize,
    pub swept: usize,
}

impl Sync {
    pub fn new(
        store: Store,
        limiter: Limiter,
        snapshot: Arc<Snapshot>,
        denials: Arc<DenialCache>,
    ) -> Self {
        Self {
            store,
            limiter,
            snapshot,
            denials,
        }
    }

    /// Write-through after a committed create or update. A failed push is logged, not
    /// returned: the change is committed, and the next reconcile pass brings it over.
    pub async fn policy_saved(&self, record: &PolicyRecord) {
        self.snapshot.upsert_policy(record);
        self.denials.forget(record.spec.name.as_str());
        let config = PolicyConfig::new(&record.spec, record.created_ms, record.version);
        if let Err(e) = self.limiter.push_policy(&config).await {
            tracing::warn!(policy = %record.spec.name, error = %e, "push after commit failed; reconcile will retry");
        }
    }

    pub async fn policy_deleted(&self, name: &PolicyName) {
        self.snapshot.remove_policy(name.as_str());
        self.denials.forget(name.as_str());
        if let Err(e) = self.limiter.delete_policy(name).await {
            tracing::warn!(policy = %name, error = %e, "delete after commit failed; reconcile will retry");
        }
    }

    /// Reloads the live API keys at once (after a key is created or revoked here).
    pub async fn keys_changed(&self) -> StoreResult<()> {
        let mut tx = self.store.begin().await?;
        let grants = tx.live_key_grants().await?;
        tx.commit().await?;
        self.snapshot.replace_keys(grants);
        Ok(())
    }

    /// One full pass: SQL -> snapshot, SQL -> Redis, orphans out of Redis.
    pub async fn reconcile_once(&self) -> anyhow::Result<ReconcileReport> {
        let started = Instant::now();
        let read_at = now_ms();
        let mut tx = self.store.begin().await?;
        let usage = self.snapshot.key_usage();
        tx.touch_api_keys(&usage).await?;
        let policies = tx.list_policies(None).await?;
        let grants = tx.live_key_grants().await?;
        tx.commit().await?;

        self.snapshot.replace_keys(grants);
        self.snapshot.replace_policies(&policies);
        // Denials of policies changed elsewhere no longer hold.
        self.denials
            .forget_changed(|name| self.snapshot.policy(name).map(|b| b.version));

        let configs: Vec<PolicyConfig> = policies
            .iter()
            .map(|r| PolicyConfig::new(&r.spec, r.created_ms, r.version))
            .collect();
        let stats = self.limiter.push_all(&configs).await;
        let known: HashSet<&str> = policies.iter().map(|r| r.spec.name.as_str()).collect();
        let swept = self
            .limiter
            .sweep_orphans(&known, read_at - SWEEP_GRACE_MS)
            .await?;

        METRICS.sync_drift.inc_by(stats.written as u64);
        METRICS
            .sync_pass_seconds
            .observe(started.elapsed().as_secs_f64());
        if stats.failed > 0 {
            anyhow::bail!("{} of {} policy pushes failed", stats.failed, configs.len());
        }
        Ok(ReconcileReport {
            policies: configs.len(),
            rewritten: stats.written,
            failed: stats.failed,
            swept,
        })
    }

    /// Reconciles every `interval` until `shutdown` is cancelled.
    pub async fn run(self, interval: Duration, shutdown: CancellationToken) {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticker.tick() => {}
            }
            match self.reconcile_once().await {
                Ok(report) => {
                    METRICS.sync_passes.with_label_values(&["ok"]).inc();
                    METRICS.sync_last_success_ms.set(now_ms());
                    if report.rewritten > 0 || report.swept > 0 {
                        tracing::info!(?report, "reconcile repaired redis");
                    }
                }
                Err(e) => {
                    METRICS.sync_passes.with_label_values(&["error"]).inc();
                    tracing::warn!(error = format!("{e:#}"), "reconcile pass failed");
                }
            }
        }
        // Last-used times collected since the last pass are not lost on shutdown.
        if let Err(e) = self.flush_key_usage().await {
            tracing::warn!(error = %e, "could not record api key usage at shutdown");
        }
        tracing::info!("sync task stopped");
    }

    async fn flush_key_usage(&self) -> StoreResult<()> {
        let usage = self.snapshot.key_usage();
        if usage.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin().await?;
        tx.touch_api_keys(&usage).await?;
        tx.commit().await
    }
}
