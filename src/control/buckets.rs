//! A policy's live state in Redis, and for keyed policies one caller's bucket: read by
//! anyone who may see the policy, reset to full by its owners (audited).

use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{AppSlug, CallerKey, FieldError, Scope};
use crate::snapshot::PolicyEntry;
use crate::store::{AuditEntry, PolicyRecord};
use ratekeeper_limiter::{BucketState, KeyedBucket};

use super::{Control, ControlError, ControlResult};

/// The caller a `key` names on a keyed policy: the key itself (per_key) or an app slug
/// (per_app); every mismatch is a 422 naming `key`.
pub(super) fn caller(record: &PolicyRecord, key: Option<&str>) -> ControlResult<Option<String>> {
    let invalid = |message: &str| ControlError::from(FieldError::new("key", message));
    match (record.spec.scope, key) {
        (Scope::Global, None) => Ok(None),
        (Scope::Global, Some(_)) => Err(invalid(
            "is only for a per_app or per_key policy; this one has a single bucket",
        )),
        (_, None) => Err(invalid(
            "is required: each caller of this policy has a bucket of its own",
        )),
        (Scope::PerKey, Some(k)) => Ok(Some(CallerKey::parse_field("key", k)?.as_str().to_owned())),
        (Scope::PerApp, Some(k)) => Ok(Some(AppSlug::parse_field("key", k)?.to_string())),
    }
}

impl Control {
    /// The policy's bucket as Redis holds it now; for a keyed policy, the bucket of the
    /// caller `key` names (the app slug for per_app). A bucket never used (or expired) is
    /// reported full.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn policy_state(
        &self,
        actor: &Actor,
        name: &str,
        key: Option<&str>,
    ) -> ControlResult<BucketState> {
        let mut tx = self.store.begin_read().await?;
        let record = self
            .readable_policy(&mut tx, actor, name, Permission::View)
            .await?;
        tx.commit().await?;
        let unavailable =
            |e: ratekeeper_limiter::LimiterError| ControlError::RedisUnavailable(e.into());
        let Some(caller) = caller(&record, key)? else {
            return self
                .limiter
                .bucket_state(&record.spec.name)
                .await
                .map_err(unavailable)?
                .ok_or(ControlError::NotFound(
                    "policy state in redis (the next sync pass restores it)",
                ));
        };
        let entry = PolicyEntry::of(&record);
        let limits = entry.limits_for(&caller);
        let bucket = KeyedBucket {
            policy: &entry.config,
            caller: &caller,
            limits,
        };
        let (available, full_in_ms) = self
            .limiter
            .keyed_state(&bucket)
            .await
            .map_err(unavailable)?;
        Ok(BucketState {
            current_permits: available as f64,
            max_permits: limits.max_permits,
            rate: limits.rate,
            version: record.version,
            updated_ms: 0,
            full_in_ms,
        })
    }

    /// Resets one caller's bucket of a keyed policy to full (owners and admins): support
    /// for a customer locked out by mistake. Audited.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn reset_bucket(&self, actor: &Actor, name: &str, key: &str) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let record = self
            .readable_policy(&mut tx, actor, name, Permission::Edit)
            .await?;
        let caller = caller(&record, Some(key))?.expect("a key was given");
        let entry = PolicyEntry::of(&record);
        let bucket = KeyedBucket {
            policy: &entry.config,
            caller: &caller,
            limits: entry.limits_for(&caller),
        };
        // Redis first: an audit event for a reset that did not happen would lie.
        self.limiter
            .reset_keyed(&bucket)
            .await
            .map_err(|e| ControlError::RedisUnavailable(e.into()))?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(record.spec.owner_app.as_str()),
            entity_type: "policy",
            entity_id: record.spec.name.as_str(),
            action: "reset_bucket",
            before: None,
            after: Some(json!({"key": caller})),
        })
        .await?;
        tx.commit().await?;
        self.sync.bucket_reset(&record.spec.name).await;
        Ok(())
    }
}

/// Top callers are counted over at most this many minutes back.
pub const TOP_MAX_MINUTES: i64 = 60;

/// Callers listed per outcome.
const TOP_LIMIT: usize = 10;

/// Who is being limited: a policy's callers with the most grants and the most denials.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct TopCallers {
    pub minutes: i64,
    /// Most granted first: counts summed over every instance, each one a caller certainly
    /// reached (exact while a policy has few callers, never over-estimated).
    pub granted: Vec<ratekeeper_limiter::CallerCount>,
    /// Most denied first.
    pub denied: Vec<ratekeeper_limiter::CallerCount>,
    /// A shadow policy's callers the limit would have denied (they were granted), most
    /// first; empty for an enforced policy unless it was in shadow mode in these minutes.
    pub shadow_denied: Vec<ratekeeper_limiter::CallerCount>,
}

impl Control {
    /// The top 10 callers of a policy by grants and by denials over the last `minutes`
    /// (1 to 60): keys for per_key, applications otherwise.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn top_callers(
        &self,
        actor: &Actor,
        name: &str,
        minutes: i64,
    ) -> ControlResult<TopCallers> {
        if !(1..=TOP_MAX_MINUTES).contains(&minutes) {
            return Err(FieldError::new(
                "minutes",
                format!("must be a whole number from 1 to {TOP_MAX_MINUTES}"),
            )
            .into());
        }
        let mut tx = self.store.begin_read().await?;
        let record = self
            .readable_policy(&mut tx, actor, name, Permission::View)
            .await?;
        tx.commit().await?;
        let top = self
            .limiter
            .top(
                record.spec.name.as_str(),
                crate::acquire::unix_minute_now(),
                minutes,
                TOP_LIMIT,
            )
            .await
            .map_err(|e| ControlError::RedisUnavailable(e.into()))?;
        Ok(TopCallers {
            minutes,
            granted: top.granted,
            denied: top.denied,
            shadow_denied: top.shadow_denied,
        })
    }
}
