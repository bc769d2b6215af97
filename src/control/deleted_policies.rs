//! A deleted policy: the version it had when it was deleted, who deleted it and when, its
//! history, and recreating it from that version. Its versions outlive it (keyed by the
//! policy's id), so an audit event or a bookmark naming it still leads somewhere.

use crate::auth::{Actor, Permission};
use crate::domain::PolicyName;
use crate::store::{AuditFilter, PolicyRecord};

use super::policies::insert_policy;
use super::policy_checks::{check_apps_exist, check_descriptors_unique};
use super::policy_history::version_view;
use super::views::rfc3339;
use super::{
    Control, ControlError, ControlResult, HISTORY_PAGE_SIZE, PolicyVersionView, PolicyView,
    app_access, authorised_app,
};

/// What is left of a deleted policy, for those who may see its application.
#[derive(Debug, Clone)]
pub struct DeletedPolicy {
    /// The version it had when it was deleted.
    pub last: PolicyVersionView,
    /// Its versions, newest first (the last `HISTORY_PAGE_SIZE`).
    pub versions: Vec<PolicyVersionView>,
    /// Who deleted it and when (RFC 3339), from the audit log.
    pub deleted: Option<(String, String)>,
    /// Whether the actor may create it again (its application exists and is theirs to edit).
    pub may_recreate: bool,
}

impl Control {
    /// The deleted policy `name`: not found while a policy of that name exists, when none
    /// ever did, or when the actor may not see the application that owned it.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn deleted_policy(&self, actor: &Actor, name: &str) -> ControlResult<DeletedPolicy> {
        let name = PolicyName::parse(name).map_err(|_| ControlError::NotFound("policy"))?;
        let mut tx = self.store.begin_read().await?;
        if tx.policy_by_name(name.as_str()).await?.is_some() {
            return Err(ControlError::NotFound("policy"));
        }
        let (policy_id, last) = tx
            .newest_version_named(name.as_str())
            .await?
            .ok_or(ControlError::NotFound("policy"))?;
        let owner = last.spec.owner_app.as_str().to_owned();
        let may_recreate = match app_access(&mut tx, actor, &owner, Permission::View).await {
            Ok((_, role)) => actor.may(role, Permission::Edit),
            // Its application is gone too: only an admin sees what is left.
            Err(ControlError::NotFound(_)) if actor.is_admin => false,
            Err(ControlError::Forbidden | ControlError::NotFound(_)) => {
                return Err(ControlError::NotFound("policy"));
            }
            Err(e) => return Err(e),
        };
        let versions = tx
            .policy_versions(&policy_id, None, HISTORY_PAGE_SIZE)
            .await?;
        let deleted = tx
            .list_audit(&AuditFilter {
                policy: Some(name.as_str().to_owned()),
                page: 1,
                per_page: 1,
                ..AuditFilter::default()
            })
            .await?
            .into_iter()
            .find(|e| e.action == "delete")
            .map(|e| (e.actor, rfc3339(e.at_ms)));
        tx.commit().await?;
        let record = PolicyRecord {
            id: policy_id,
            spec: last.spec.clone(),
            version: last.version,
            created_ms: versions.last().map_or(last.at_ms, |v| v.at_ms),
            updated_ms: last.at_ms,
        };
        Ok(DeletedPolicy {
            last: version_view(&record, last),
            versions: versions
                .into_iter()
                .map(|v| version_view(&record, v))
                .collect(),
            deleted,
            may_recreate,
        })
    }

    /// Creates the deleted policy `name` again as it was when it was deleted: a new
    /// policy (version 1, a history of its own), checked like any other.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn recreate_policy(&self, actor: &Actor, name: &str) -> ControlResult<PolicyView> {
        let name = PolicyName::parse(name).map_err(|_| ControlError::NotFound("policy"))?;
        let mut tx = self.store.begin().await?;
        let (_, last) = tx
            .newest_version_named(name.as_str())
            .await?
            .ok_or(ControlError::NotFound("policy"))?;
        let app = authorised_app(
            &mut tx,
            actor,
            last.spec.owner_app.as_str(),
            Permission::Edit,
        )
        .await?;
        check_apps_exist(&mut tx, &last.spec).await?;
        check_descriptors_unique(&mut tx, &last.spec).await?;
        let record = insert_policy(&mut tx, actor, &last.spec, &app).await?;
        tx.commit().await?;
        self.sync.policy_saved(&record).await;
        Ok(PolicyView::from(&record))
    }
}
