//! Keeps Redis a faithful copy of the SQL store: a push right after each commit
//! (write-through), and a reconcile pass on an interval that repairs whatever a push
//! missed, a Redis restart or flush lost, or another instance left behind.
//!
//! A pass is *full* (every policy read from SQL and checked in Redis, orphans swept) when
//! the SQL fingerprint changed since this instance's last full pass, or Redis lacks the
//! marker of that fingerprint (flushed, restarted). Otherwise it is *light*: API keys are
//! reloaded, and one slice of the policies is checked in Redis, so that a key lost on its
//! own (evicted, deleted by hand) is restored within a bounded number of passes while a
//! quiet pass over 100,000 policies stays cheap for Redis and the acquire path.

use std::collections::HashSet;
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::acquire::DenialCache;
use crate::domain::PolicyName;
use crate::snapshot::Snapshot;
use crate::store::{KeyGrant, PolicyRecord, Store, StoreResult, now_ms};
use crate::telemetry::Metrics;
use ratekeeper_limiter::{Limiter, PolicyConfig};

/// Keys of deleted policies are swept only when their incarnation is older than this,
/// so a policy another instance created (and pushed) while we read SQL is never taken.
const SWEEP_GRACE_MS: i64 = 60_000;

/// How many policies a light pass checks in Redis.
const LIGHT_PASS_SLICE: usize = 1000;

#[derive(Clone)]
pub struct Syncer {
    store: Store,
    limiter: Limiter,
    snapshot: Arc<Snapshot>,
    denials: Arc<DenialCache>,
    metrics: Arc<Metrics>,
    memo: Arc<tokio::sync::Mutex<Memo>>,
    /// Identifies this instance's change notices.
    instance: Arc<str>,
    /// Woken by another instance's change notice: reconcile now, not at the next tick.
    wake: Arc<Notify>,
    /// How long a new key stays announced in Redis: long enough for every instance to
    /// reload its keys, by a notice or else by its interval.
    announce_keys_for: Duration,
}

/// What the passes so far saw, for the ones after them.
#[derive(Default)]
struct Memo {
    /// The SQL fingerprint of the policies last read into the snapshot.
    loaded: Option<String>,
    /// The fingerprint Redis was last seen to mirror completely (a full pass without a
    /// failure, which then set Redis' marker to it).
    mirrored: Option<String>,
    /// The policies as Redis should hold them, as last read (the snapshot's own).
    configs: Vec<Arc<PolicyConfig>>,
    /// Where the next light pass's slice starts.
    cursor: usize,
}

/// What one reconcile pass found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileReport {
    /// Whether every policy was read from SQL and checked in Redis.
    pub full: bool,
    pub policies: usize,
    pub checked: usize,
    pub rewritten: usize,
    pub failed: usize,
    pub swept: usize,
}

impl Syncer {
    pub fn new(
        store: Store,
        limiter: Limiter,
        snapshot: Arc<Snapshot>,
        denials: Arc<DenialCache>,
        metrics: Arc<Metrics>,
        interval: Duration,
    ) -> Self {
        Self {
            store,
            limiter,
            snapshot,
            denials,
            metrics,
            memo: Arc::default(),
            instance: crate::store::new_id().into(),
            wake: Arc::default(),
            announce_keys_for: (interval * 3).max(Duration::from_secs(60)),
        }
    }

    pub fn instance(&self) -> &str {
        &self.instance
    }

    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Tells the other instances to reconcile now (best effort: they would by the next
    /// interval anyway).
    #[tracing::instrument(level = "debug", skip_all)]
    async fn announce(&self) {
        if let Err(e) = self.limiter.announce_change(&self.instance).await {
            tracing::warn!(error = %e, "could not announce a change to other instances");
        }
    }

    /// Write-through after a committed create or update. A failed push is logged, not
    /// returned: the change is committed, and the next reconcile pass brings it over.
    #[tracing::instrument(skip_all, fields(policy = %record.spec.name))]
    pub async fn policy_saved(&self, record: &PolicyRecord) {
        self.snapshot.upsert_policy(record);
        self.denials.forget(record.spec.name.as_str());
        let config = PolicyConfig::new(&record.spec, record.created_ms, record.version);
        if let Err(e) = self.limiter.push_policy(&config).await {
            tracing::warn!(policy = %record.spec.name, error = %e, "push after commit failed; reconcile will retry");
        }
        self.announce().await;
    }

    #[tracing::instrument(skip_all, fields(policy = %name))]
    pub async fn policy_deleted(&self, name: &PolicyName) {
        self.snapshot.remove_policy(name.as_str());
        self.denials.forget(name.as_str());
        if let Err(e) = self.limiter.delete_policy(name).await {
            tracing::warn!(policy = %name, error = %e, "delete after commit failed; reconcile will retry");
        }
        self.announce().await;
    }

    /// After a bucket of the policy was reset to full: the denials remembered of it no
    /// longer hold, here and on the other instances (which drop theirs as they hear the
    /// notice), or a caller would stay refused until its old retry time.
    #[tracing::instrument(skip_all, fields(policy = %name))]
    pub async fn bucket_reset(&self, name: &PolicyName) {
        self.denials.forget(name.as_str());
        self.announce().await;
    }

    /// After a key was committed, before it is shown: announces it in Redis, so that
    /// every instance accepts it at once (`acquire::new_keys`), then reloads the keys
    /// here and tells the others.
    pub async fn key_created(&self, grant: &KeyGrant) -> StoreResult<()> {
        self.announce_key(grant).await;
        self.keys_changed().await
    }

    /// After a rotation: the old key is shortened (no announcement may say otherwise),
    /// the new one announced.
    pub async fn key_rotated(&self, new_key: &KeyGrant) -> StoreResult<()> {
        self.forget_announced_keys().await;
        self.key_created(new_key).await
    }

    /// After keys were revoked or moved to another application: none is accepted from an
    /// announcement any more, and the keys are reloaded.
    pub async fn keys_withdrawn(&self) -> StoreResult<()> {
        self.forget_announced_keys().await;
        self.keys_changed().await
    }

    /// Announcing may fail (Redis away): the key then works on each instance as it
    /// reloads its keys.
    #[tracing::instrument(skip_all, fields(key_id = %grant.key_id))]
    async fn announce_key(&self, grant: &KeyGrant) {
        let text = crate::acquire::announcement(grant, now_ms());
        let ttl = self.announce_keys_for;
        if let Err(e) = self
            .limiter
            .announce_new_key(&grant.key_hash, &text, ttl)
            .await
        {
            tracing::warn!(error = %e, "could not announce a new api key; other instances accept it once they reload their keys");
        }
    }

    /// Every announcement is dropped: an instance that has not reloaded since a key was
    /// revoked would otherwise take the announcement's older word for it. If Redis cannot
    /// be reached, an instance that reloaded after the announcement refuses it anyway,
    /// and the others reload within the interval.
    #[tracing::instrument(skip_all)]
    async fn forget_announced_keys(&self) {
        if let Err(e) = self.limiter.forget_new_keys().await {
            tracing::warn!(error = %e, "could not drop the announced api keys");
        }
    }

    /// Reloads the live API keys at once (after a key is created or revoked here), and
    /// tells the other instances, so that a revoked key stops working everywhere.
    #[tracing::instrument(skip_all)]
    pub async fn keys_changed(&self) -> StoreResult<()> {
        let read_at = now_ms();
        let mut tx = self.store.begin_read().await?;
        let grants = tx.key_grants().await?;
        tx.commit().await?;
        self.snapshot.replace_keys(grants, read_at);
        self.announce().await;
        Ok(())
    }

    /// One pass, full or light (see the module's documentation). SQL is read first and
    /// the snapshot (API keys, policies) follows it whether or not Redis answers: an
    /// instance started while Redis is down knows its keys and policies, and answers by
    /// each policy's failure mode instead of 401 and 404.
    #[tracing::instrument(skip_all)]
    pub async fn reconcile_once(&self) -> anyhow::Result<ReconcileReport> {
        let started = Instant::now();
        let read_at = now_ms();
        // One pass at a time per instance: the memo is what the passes before saw.
        let mut memo = self.memo.lock().await;
        self.flush_key_usage().await?;
        let mut tx = self.store.begin_read().await?;
        let grants = tx.key_grants().await?;
        let fingerprint = tx.policy_fingerprint().await?;
        let reload = if memo.loaded.as_deref() != Some(fingerprint.as_str()) {
            let mut reload = self.snapshot.reload_policies();
            let mut records = pin!(tx.each_policy());
            while let Some(record) = records.try_next().await? {
                reload.add(&record);
            }
            Some(reload)
        } else {
            None
        };
        tx.commit().await?;
        self.snapshot.replace_keys(grants, read_at);
        if let Some(reload) = reload {
            memo.configs = reload.finish();
            // Denials of policies changed elsewhere no longer hold.
            self.denials
                .forget_changed(|name| self.snapshot.policy(name).map(|p| p.version()));
            memo.loaded = Some(fingerprint.clone());
        }

        let marker = self.limiter.sync_marker().await?;
        let full = memo.mirrored.as_deref() != Some(fingerprint.as_str())
            || marker.as_deref() != Some(fingerprint.as_str());
        let report = if full {
            let report = self.full_pass(&memo.configs, read_at).await?;
            if report.failed == 0 {
                // Only a pass that mirrored everything may vouch for the fingerprint.
                self.limiter.set_sync_marker(&fingerprint).await?;
                memo.mirrored = Some(fingerprint);
            } else {
                memo.mirrored = None;
            }
            report
        } else {
            let total = memo.configs.len();
            let start = if memo.cursor >= total { 0 } else { memo.cursor };
            let end = (start + LIGHT_PASS_SLICE).min(total);
            let stats = self.limiter.push_all(&memo.configs[start..end]).await;
            memo.cursor = end;
            ReconcileReport {
                full: false,
                policies: total,
                checked: end - start,
                rewritten: stats.written,
                failed: stats.failed,
                swept: 0,
            }
        };
        drop(memo);

        self.metrics.sync_drift.inc_by(report.rewritten as u64);
        self.metrics
            .sync_pass_seconds
            .observe(started.elapsed().as_secs_f64());
        if report.failed > 0 {
            anyhow::bail!(
                "{} of {} policy pushes failed",
                report.failed,
                report.checked
            );
        }
        Ok(report)
    }

    /// Every policy checked in Redis, and the keys of policies that are gone swept.
    #[tracing::instrument(skip_all, fields(policies = configs.len()))]
    async fn full_pass(
        &self,
        configs: &[Arc<PolicyConfig>],
        read_at: i64,
    ) -> anyhow::Result<ReconcileReport> {
        let stats = self.limiter.push_all(configs).await;
        let known: HashSet<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        let swept = self
            .limiter
            .sweep_orphans(&known, read_at - SWEEP_GRACE_MS)
            .await?;
        Ok(ReconcileReport {
            full: true,
            policies: configs.len(),
            checked: configs.len(),
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
                _ = self.wake.notified() => {}
            }
            match self.reconcile_once().await {
                Ok(report) => {
                    self.metrics.sync_passes.with_label_values(&["ok"]).inc();
                    self.metrics.sync_last_success_ms.set(now_ms());
                    if report.rewritten > 0 || report.swept > 0 {
                        tracing::info!(?report, "reconcile repaired redis");
                    }
                }
                Err(e) => {
                    self.metrics.sync_passes.with_label_values(&["error"]).inc();
                    tracing::warn!(
                        redis = self.limiter.address(),
                        error = format!("{e:#}"),
                        "reconcile pass failed"
                    );
                }
            }
        }
        // Last-used times collected since the last pass are not lost on shutdown.
        if let Err(e) = self.flush_key_usage().await {
            tracing::warn!(error = %e, "could not record api key usage at shutdown");
        }
        tracing::info!("sync task stopped");
    }

    #[tracing::instrument(level = "debug", skip_all)]
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
