use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{AppSlug, FieldError, FieldErrors, PolicyName, PolicySpec, Scope};
use crate::store::{AuditEntry, PolicyRecord, StoreError};

use super::inputs::PolicyInput;
use super::policy_spec::{new_policy, patched_policy};
use super::{Control, ControlError, ControlResult, PolicyView, authorised_app};

impl Control {
    #[tracing::instrument(skip_all, fields(actor = %actor.name, name = ?input.name))]
    pub async fn create_policy(
        &self,
        actor: &Actor,
        input: PolicyInput,
    ) -> ControlResult<PolicyView> {
        let spec = new_policy(&input)?;
        let mut tx = self.store.begin().await?;
        // The owner is a field of the body: an unknown one is invalid input, not a 404.
        if tx.app_by_slug(spec.owner_app.as_str()).await?.is_none() {
            return Err(FieldError::new("owner_app", "no such application").into());
        }
        let app = authorised_app(&mut tx, actor, spec.owner_app.as_str(), Permission::Edit).await?;
        check_apps_exist(&mut tx, &spec).await?;
        let record = match tx.insert_policy(&app.id, &spec).await {
            Err(StoreError::Conflict) => {
                return Err(ControlError::Conflict(format!(
                    "a policy named {:?} already exists",
                    spec.name.as_str()
                )));
            }
            other => other?,
        };
        let view = PolicyView::from(&record);
        tx.record_policy_version(&record, &actor.name, "create", None)
            .await?;
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(&app.slug),
            entity_type: "policy",
            entity_id: spec.name.as_str(),
            action: "create",
            before: None,
            after: Some(json!(view)),
        })
        .await?;
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
        let mut tx = self.store.begin().await?;
        let current = self
            .readable_policy(&mut tx, actor, name, Permission::Edit)
            .await?;
        if let Some(seen) = input.version
            && seen != current.version
        {
            return Err(ControlError::VersionConflict {
                current: current.version,
            });
        }
        let spec = patched_policy(&input, &current.spec)?;
        if spec == current.spec {
            tx.commit().await?;
            return Ok(PolicyView::from(&current));
        }
        check_apps_exist(&mut tx, &spec).await?;
        // The row is locked since it was read, so its version still holds.
        let updated = tx.update_policy(&current, &spec).await?.ok_or_else(|| {
            ControlError::Internal(anyhow::anyhow!("locked policy {name:?} changed under us"))
        })?;
        let view = PolicyView::from(&updated);
        tx.record_policy_version(&updated, &actor.name, "update", None)
            .await?;
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(spec.owner_app.as_str()),
            entity_type: "policy",
            entity_id: spec.name.as_str(),
            action: "update",
            before: Some(json!(PolicyView::from(&current))),
            after: Some(json!(view)),
        })
        .await?;
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
        tx.delete_policy(&current.id).await?;
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(current.spec.owner_app.as_str()),
            entity_type: "policy",
            entity_id: current.spec.name.as_str(),
            action: "delete",
            before: Some(json!(PolicyView::from(&current))),
            after: None,
        })
        .await?;
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

    /// The policies of other applications that allow `slug`, for those who may see it.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn limits_on_app(&self, actor: &Actor, slug: &str) -> ControlResult<Vec<PolicyView>> {
        let mut tx = self.store.begin_read().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::View).await?;
        let records = tx.policies_allowing(&app.slug).await?;
        tx.commit().await?;
        Ok(records.iter().map(PolicyView::from).collect())
    }
}

/// The applications a spec names exist: its allowed apps and, for a per_app policy, its
/// overrides' matches (each named in the error).
pub(super) async fn check_apps_exist(
    tx: &mut crate::store::Tx,
    spec: &PolicySpec,
) -> ControlResult<()> {
    let mut errors = FieldErrors::default();
    let unknown = tx.unknown_slugs(&spec.allowed_apps).await?;
    if !unknown.is_empty() {
        errors.push(
            "allowed_apps",
            format!("no such application: {}", unknown.join(", ")),
        );
    }
    if spec.scope == Scope::PerApp && !spec.overrides.is_empty() {
        let slugs: Vec<AppSlug> = spec
            .overrides
            .iter()
            .filter_map(|o| AppSlug::parse(&o.matches).ok())
            .collect();
        let unknown = tx.unknown_slugs(&slugs).await?;
        for (i, o) in spec.overrides.iter().enumerate() {
            if unknown.contains(&o.matches) {
                errors.push(
                    format!("overrides[{i}].match"),
                    format!("no such application: {}", o.matches),
                );
            }
        }
    }
    Ok(errors.into_result()?)
}
