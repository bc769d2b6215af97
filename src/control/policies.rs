use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{PolicyName, PolicySpec};
use crate::store::{AppRecord, AuditEntry, PolicyRecord, StoreError, Tx};

use super::inputs::PolicyInput;
use super::policy_checks::{checked_new_policy, checked_patch};
use super::{Control, ControlError, ControlResult, PolicyView, authorised_app, visible_app};

impl Control {
    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = ?input.name))]
    pub async fn create_policy(
        &self,
        actor: &Actor,
        input: PolicyInput,
    ) -> ControlResult<PolicyView> {
        let mut tx = self.store.begin().await?;
        let (spec, app) = checked_new_policy(&mut tx, actor, &input).await?;
        let record = insert_policy(&mut tx, actor, &spec, &app).await?;
        let view = PolicyView::from(&record);
        tx.commit().await?;
        self.sync.policy_saved(&record).await;
        Ok(view)
    }

    /// Changes any subset of a policy's fields. A change that changes nothing keeps the
    /// version (and so never touches Redis).
    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn update_policy(
        &self,
        actor: &Actor,
        name: &str,
        input: PolicyInput,
    ) -> ControlResult<PolicyView> {
        self.edit_policy(actor, name, |_| input).await
    }

    /// A change made from the policy as it is: in one transaction the policy is read
    /// (and locked) once with its application's permission, `input_of` makes the change
    /// from it (a form compares its amounts with the stored ones, in its units, and
    /// carries the fields it could not read as `unreadable`), and the change is checked,
    /// with every error at once, and saved.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn edit_policy(
        &self,
        actor: &Actor,
        name: &str,
        input_of: impl FnOnce(&PolicyView) -> PolicyInput,
    ) -> ControlResult<PolicyView> {
        let mut tx = self.store.begin().await?;
        let current = self
            .readable_policy(&mut tx, actor, name, Permission::Edit)
            .await?;
        let input = input_of(&PolicyView::from(&current));
        if let Some(seen) = input.version
            && seen != current.version
        {
            return Err(ControlError::VersionConflict {
                current: current.version,
            });
        }
        let spec = checked_patch(&mut tx, &input, &current.spec).await?;
        if spec == current.spec {
            tx.commit().await?;
            return Ok(PolicyView::from(&current));
        }
        let updated = update_policy(&mut tx, actor, &current, &spec).await?;
        let view = PolicyView::from(&updated);
        tx.commit().await?;
        self.sync.policy_saved(&updated).await;
        Ok(view)
    }

    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn delete_policy(&self, actor: &Actor, name: &str) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let current = self
            .readable_policy(&mut tx, actor, name, Permission::Edit)
            .await?;
        delete_policy(&mut tx, actor, &current).await?;
        tx.commit().await?;
        self.sync.policy_deleted(&current.spec.name).await;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, name = %name))]
    pub async fn get_policy(&self, actor: &Actor, name: &str) -> ControlResult<PolicyView> {
        let mut tx = self.store.begin_read().await?;
        let record = self
            .readable_policy(&mut tx, actor, name, Permission::View)
            .await?;
        tx.commit().await?;
        Ok(PolicyView::from(&record))
    }

    /// The policies of one application, or of every application the actor may see.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, app = ?app))]
    pub async fn list_policies(
        &self,
        actor: &Actor,
        app: Option<&str>,
    ) -> ControlResult<Vec<PolicyView>> {
        let mut tx = self.store.begin_read().await?;
        let records = match (app, &actor.user_id) {
            (Some(slug), _) => {
                let app = authorised_app(&mut tx, actor, slug, Permission::View).await?;
                tx.list_policies(Some(&app.id)).await?
            }
            (None, _) if actor.is_admin => tx.list_policies(None).await?,
            (None, Some(user_id)) => {
                let mut all = Vec::new();
                for app in tx.list_apps_of_user(user_id).await? {
                    all.extend(tx.list_policies(Some(&app.id)).await?);
                }
                all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
                all
            }
            (None, None) => Vec::new(),
        };
        tx.commit().await?;
        Ok(records.iter().map(PolicyView::from).collect())
    }

    /// [`Self::list_policies`] for a policy file: an application the actor may not see
    /// is as unknown as one that does not exist (the same 404), so that an export cannot
    /// be used to learn which slugs exist.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn export_policies(
        &self,
        actor: &Actor,
        app: Option<&str>,
    ) -> ControlResult<Vec<PolicyView>> {
        if let Some(slug) = app {
            let mut tx = self.store.begin_read().await?;
            visible_app(&mut tx, actor, slug).await?;
            tx.commit().await?;
        }
        self.list_policies(actor, app).await
    }

    /// The policy, if the actor may do `wanted` with it. For an edit its row stays
    /// locked until the transaction ends, so that concurrent changes apply one after the
    /// other instead of failing each other's version check.
    pub(super) async fn readable_policy(
        &self,
        tx: &mut crate::store::Tx,
        actor: &Actor,
        name: &str,
        wanted: Permission,
    ) -> ControlResult<PolicyRecord> {
        // A string that cannot be a policy name names none (and never reaches SQL).
        let name = PolicyName::parse(name).map_err(|_| ControlError::NotFound("policy"))?;
        let record = match wanted {
            Permission::Edit => tx.policy_by_name_for_update(name.as_str()).await?,
            Permission::View => tx.policy_by_name(name.as_str()).await?,
        }
        .ok_or(ControlError::NotFound("policy"))?;
        match authorised_app(tx, actor, record.spec.owner_app.as_str(), wanted).await {
            Ok(_) => Ok(record),
            // The members of an application a policy allows may see it: it limits their
            // keys (and a 429 should not be a mystery to them).
            Err(ControlError::Forbidden)
                if wanted == Permission::View
                    && match &actor.user_id {
                        Some(user_id) => {
                            tx.member_of_any(user_id, &record.spec.allowed_apps).await?
                        }
                        None => false,
                    } =>
            {
                Ok(record)
            }
            Err(e) => Err(e),
        }
    }
}

/// Saves a new, checked policy in `tx`: its first version in the history and the audit.
pub(super) async fn insert_policy(
    tx: &mut Tx,
    actor: &Actor,
    spec: &PolicySpec,
    app: &AppRecord,
) -> ControlResult<PolicyRecord> {
    let record = match tx.insert_policy(&app.id, spec).await {
        Err(StoreError::Conflict) => {
            return Err(ControlError::Conflict(format!(
                "a policy named {:?} already exists",
                spec.name.as_str()
            )));
        }
        other => other?,
    };
    tx.record_policy_version(&record, &actor.name, "create", None)
        .await?;
    tx.record_audit(AuditEntry {
        actor: actor.author(),
        app_slug: Some(&app.slug),
        entity_type: "policy",
        entity_id: spec.name.as_str(),
        action: "create",
        before: None,
        after: Some(json!(PolicyView::from(&record))),
    })
    .await?;
    Ok(record)
}

/// Changes the policy `current` to `spec` in `tx`: a new version and the audit. A row
/// not locked since it was read may have changed meanwhile: a conflict, to try again.
pub(super) async fn update_policy(
    tx: &mut Tx,
    actor: &Actor,
    current: &PolicyRecord,
    spec: &PolicySpec,
) -> ControlResult<PolicyRecord> {
    let updated = tx.update_policy(current, spec).await?.ok_or_else(|| {
        ControlError::Conflict(format!(
            "policy {:?} changed meanwhile; try again",
            spec.name.as_str()
        ))
    })?;
    tx.record_policy_version(&updated, &actor.name, "update", None)
        .await?;
    tx.record_audit(AuditEntry {
        actor: actor.author(),
        app_slug: Some(spec.owner_app.as_str()),
        entity_type: "policy",
        entity_id: spec.name.as_str(),
        action: "update",
        before: Some(json!(PolicyView::from(current))),
        after: Some(json!(PolicyView::from(&updated))),
    })
    .await?;
    Ok(updated)
}

/// Deletes the locked policy `current` in `tx`, audited.
pub(super) async fn delete_policy(
    tx: &mut Tx,
    actor: &Actor,
    current: &PolicyRecord,
) -> ControlResult<()> {
    tx.delete_policy(&current.id).await?;
    tx.record_audit(AuditEntry {
        actor: actor.author(),
        app_slug: Some(current.spec.owner_app.as_str()),
        entity_type: "policy",
        entity_id: current.spec.name.as_str(),
        action: "delete",
        before: Some(json!(PolicyView::from(current))),
        after: None,
    })
    .await?;
    Ok(())
}
