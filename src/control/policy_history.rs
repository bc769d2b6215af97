//! A policy's saved versions, and rolling back to one: a rollback saves a new version equal
//! to the old one, checked, audited and pushed to Redis like any other change.

use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{FieldError, FieldErrors, PolicyName};
use crate::store::{AuditEntry, PolicyRecord, PolicyVersionRecord};

use super::inputs::RollbackInput;
use super::policy_checks::{check_apps_exist, check_descriptors_unique};
use super::views::rfc3339;
use super::{Control, ControlError, ControlResult, PolicyVersionView, PolicyView, app_access};

/// Versions shown at once, newest first.
pub const HISTORY_PAGE_SIZE: u32 = 50;

/// A page of a policy's history: the policy now, whether the actor may roll it back, and
/// its versions (newest first, older ones on later pages).
#[derive(Debug, Clone)]
pub struct PolicyHistory {
    pub policy: PolicyView,
    pub may_edit: bool,
    pub versions: Vec<PolicyVersionView>,
    /// The version before which the next page starts, if there are older versions.
    pub older_than: Option<i64>,
    /// The version just older than this page, which its oldest version changed.
    pub before_page: Option<PolicyVersionView>,
}

pub(super) fn version_view(current: &PolicyRecord, v: PolicyVersionRecord) -> PolicyVersionView {
    let as_record = PolicyRecord {
        id: current.id.clone(),
        spec: v.spec,
        version: v.version,
        created_ms: current.created_ms,
        updated_ms: v.at_ms,
    };
    PolicyVersionView {
        version: v.version,
        action: v.action,
        restored_version: v.restored_version,
        author: v.author,
        at: rfc3339(v.at_ms),
        policy: PolicyView::from(&as_record),
    }
}

impl Control {
    /// The versions of a policy older than `before` (all when `None`), a page at a time.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn policy_history(
        &self,
        actor: &Actor,
        name: &str,
        before: Option<i64>,
    ) -> ControlResult<PolicyHistory> {
        let name = PolicyName::parse(name).map_err(|_| ControlError::NotFound("policy"))?;
        let mut tx = self.store.begin_read().await?;
        // Whoever may see the policy sees its history (also a member of an application it
        // allows); only the owning application's role can make it editable.
        let current = self
            .readable_policy(&mut tx, actor, name.as_str(), Permission::View)
            .await?;
        let role = match app_access(
            &mut tx,
            actor,
            current.spec.owner_app.as_str(),
            Permission::View,
        )
        .await
        {
            Ok((_, role)) => role,
            Err(ControlError::Forbidden) => None,
            Err(e) => return Err(e),
        };
        // One more than a page: whether older versions exist, in the same statement.
        let mut versions = tx
            .policy_versions(&current.id, before, HISTORY_PAGE_SIZE + 1)
            .await?;
        tx.commit().await?;
        let before_page = if versions.len() > HISTORY_PAGE_SIZE as usize {
            versions.pop()
        } else {
            None
        };
        let older_than = before_page
            .is_some()
            .then(|| versions.last().map_or(0, |v| v.version));
        Ok(PolicyHistory {
            may_edit: actor.may(role, Permission::Edit),
            versions: versions
                .into_iter()
                .map(|v| version_view(&current, v))
                .collect(),
            before_page: before_page.map(|v| version_view(&current, v)),
            policy: PolicyView::from(&current),
            older_than,
        })
    }

    /// Saved versions of a policy, each `None` where the policy has no such version: for
    /// an edit that came second, the version it started from and the one it met.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn policy_versions_at(
        &self,
        actor: &Actor,
        name: &str,
        versions: &[i64],
    ) -> ControlResult<Vec<Option<PolicyVersionView>>> {
        let mut tx = self.store.begin_read().await?;
        let current = self
            .readable_policy(&mut tx, actor, name, Permission::View)
            .await?;
        let mut found = Vec::with_capacity(versions.len());
        for &version in versions {
            let record = tx.policy_version(&current.id, version).await?;
            found.push(record.map(|v| version_view(&current, v)));
        }
        tx.commit().await?;
        Ok(found)
    }

    /// Makes an earlier version the policy's again, as a new version. Refused (409) when
    /// the policy is no longer at the version the client saw; a version equal to the
    /// current policy changes nothing.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn rollback_policy(
        &self,
        actor: &Actor,
        name: &str,
        input: RollbackInput,
    ) -> ControlResult<PolicyView> {
        // Who may roll back is asked first: a viewer hears 403 whatever the body says.
        let mut tx = self.store.begin().await?;
        let current = self
            .readable_policy(&mut tx, actor, name, Permission::Edit)
            .await?;
        let (to_version, seen) = match (input.to_version, input.version) {
            (Some(to), Some(seen)) => (to, seen),
            (to, seen) => {
                let mut errors = FieldErrors::default();
                if to.is_none() {
                    errors.push("to_version", "is required: the version to restore");
                }
                if seen.is_none() {
                    errors.push("version", "is required: the policy's current version");
                }
                return Err(errors.into());
            }
        };
        if seen != current.version {
            return Err(ControlError::VersionConflict {
                current: current.version,
            });
        }
        let target = tx
            .policy_version(&current.id, to_version)
            .await?
            .ok_or_else(|| {
                FieldError::new(
                    "to_version",
                    format!("this policy has no saved version {to_version}"),
                )
            })?;
        if target.spec == current.spec {
            tx.commit().await?;
            return Ok(PolicyView::from(&current));
        }
        check_apps_exist(&mut tx, &target.spec).await?;
        check_descriptors_unique(&mut tx, &target.spec).await?;
        // The row is locked since it was read, so its version still holds.
        let updated = tx
            .update_policy(&current, &target.spec)
            .await?
            .ok_or_else(|| {
                ControlError::Internal(anyhow::anyhow!("locked policy {name:?} changed under us"))
            })?;
        tx.record_policy_version(&updated, &actor.name, "rollback", Some(to_version))
            .await?;
        let view = PolicyView::from(&updated);
        let mut after = json!(view);
        after["restored_version"] = json!(to_version);
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(current.spec.owner_app.as_str()),
            entity_type: "policy",
            entity_id: current.spec.name.as_str(),
            action: "rollback",
            before: Some(json!(PolicyView::from(&current))),
            after: Some(after),
        })
        .await?;
        tx.commit().await?;
        self.sync.policy_saved(&updated).await;
        Ok(view)
    }
}
