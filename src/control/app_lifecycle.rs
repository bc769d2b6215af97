//! An application's later life: renamed (its slug, name or description) and deleted.
//!
//! Everything that refers to an application by its id (the policies it owns, its keys,
//! its members) follows a rename by itself. What names it by slug is rewritten in the
//! same transaction: other policies' `allowed_apps` and the matches of `per_app`
//! overrides. Those policies get a new version (audited, each as an update by whoever
//! renamed the application) and reach Redis through the normal push, so the renamed
//! application's keys keep every permission they had. Audit events keep the slug they
//! were written with: they are a record of what happened.

use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{AppSlug, FieldErrors, PolicySpec, Scope, check_description};
use crate::store::{AuditEntry, PolicyRecord, StoreError, Tx};

use super::inputs::{AppInput, text};
use super::{AppView, Control, ControlError, ControlResult, authorised_app};

impl Control {
    /// Changes any of the application's slug, name and description (owners and admins).
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn update_app(
        &self,
        actor: &Actor,
        slug: &str,
        input: AppInput,
    ) -> ControlResult<AppView> {
        let mut errors = FieldErrors::default();
        let new_slug = input
            .slug
            .as_deref()
            .and_then(|s| errors.check(AppSlug::parse(s.trim())));
        let name = input
            .name
            .as_deref()
            .and_then(|n| errors.check(text("name", n, 200)));
        let description = input
            .description
            .as_deref()
            .and_then(|d| errors.check(check_description("description", d)));
        errors.into_result()?;

        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let old_slug = AppSlug::parse(&app.slug).map_err(|e| ControlError::Internal(e.into()))?;
        let new_slug = new_slug.unwrap_or_else(|| old_slug.clone());
        let name = name.unwrap_or_else(|| app.name.clone());
        let description = description.unwrap_or_else(|| app.description.clone());
        let before = AppView::from(&app);
        match tx.update_app(&app.id, &new_slug, &name, &description).await {
            Err(StoreError::Conflict) => {
                return Err(ControlError::Conflict(format!(
                    "an application with slug {:?} already exists",
                    new_slug.as_str()
                )));
            }
            other => other?,
        }
        let renamed = if new_slug == old_slug {
            Vec::new()
        } else {
            rewrite_references(&mut tx, actor, &old_slug, Some(&new_slug)).await?
        };
        let mut after_app = app.clone();
        (after_app.slug, after_app.name, after_app.description) =
            (new_slug.to_string(), name, description);
        let after = AppView::from(&after_app);
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(new_slug.as_str()),
            entity_type: "app",
            entity_id: new_slug.as_str(),
            action: if new_slug == old_slug {
                "update"
            } else {
                "rename"
            },
            before: Some(json!(before)),
            after: Some(json!(after)),
        })
        .await?;
        tx.commit().await?;
        for record in &renamed {
            self.sync.policy_saved(record).await;
        }
        if new_slug != old_slug {
            // The keys' snapshot names each key's application by slug.
            self.withdraw_keys().await;
        }
        Ok(after)
    }

    /// Deletes the application with its keys and memberships (owners and admins).
    /// Refused while it owns policies; other policies that allowed it no longer name it
    /// (refused when it is the only application one of them allows).
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn delete_app(&self, actor: &Actor, slug: &str) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let count = tx.count_policies_of_app(&app.id).await?;
        if count > 0 {
            return Err(ControlError::OwnsPolicies {
                app: app.slug.clone(),
                count,
            });
        }
        let old_slug = AppSlug::parse(&app.slug).map_err(|e| ControlError::Internal(e.into()))?;
        let changed = rewrite_references(&mut tx, actor, &old_slug, None).await?;
        tx.delete_app(&app.id).await?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "app",
            entity_id: &app.slug,
            action: "delete",
            before: Some(json!(AppView::from(&app))),
            after: None,
        })
        .await?;
        tx.commit().await?;
        for record in &changed {
            self.sync.policy_saved(record).await;
        }
        self.withdraw_keys().await;
        Ok(())
    }
}

/// Every policy naming `old` (in `allowed_apps`, or as a `per_app` override's match)
/// names `new` instead, or no longer names it when `new` is `None`; each changed policy
/// gets a new version and an audit event. The changed policies, for the push to Redis.
async fn rewrite_references(
    tx: &mut Tx,
    actor: &Actor,
    old: &AppSlug,
    new: Option<&AppSlug>,
) -> ControlResult<Vec<PolicyRecord>> {
    let mut changed = Vec::new();
    for current in tx.policies_naming_app(old).await? {
        let spec = replaced(&current.spec, old, new);
        if spec == current.spec {
            continue; // a per_key override whose key is spelt like the slug
        }
        if spec.allowed_apps.is_empty() {
            return Err(ControlError::Conflict(format!(
                "policy {:?} of {} allows only {old}; let it allow another application \
                 or delete it first",
                spec.name.as_str(),
                spec.owner_app
            )));
        }
        // A version of its own in the policy's history: what the rename changed in it.
        let updated = super::policies::update_policy(tx, actor, &current, &spec).await?;
        changed.push(updated);
    }
    Ok(changed)
}

/// The spec with `old` replaced by `new` (or removed) where it names an application.
fn replaced(spec: &PolicySpec, old: &AppSlug, new: Option<&AppSlug>) -> PolicySpec {
    let mut spec = spec.clone();
    if spec.owner_app == *old
        && let Some(new) = new
    {
        spec.owner_app = new.clone();
    }
    let mut allowed = Vec::with_capacity(spec.allowed_apps.len());
    for slug in spec.allowed_apps.drain(..) {
        let slug = match (slug == *old, new) {
            (false, _) => Some(slug),
            (true, Some(new)) => Some(new.clone()),
            (true, None) => None,
        };
        if let Some(slug) = slug
            && !allowed.contains(&slug)
        {
            allowed.push(slug);
        }
    }
    spec.allowed_apps = allowed;
    if spec.scope == Scope::PerApp {
        spec.overrides.retain_mut(|o| {
            if o.matches != old.as_str() {
                return true;
            }
            match new {
                Some(new) => {
                    o.matches = new.to_string();
                    true
                }
                None => false,
            }
        });
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rename_replaces_the_slug_and_a_delete_removes_it() {
        let slug = |s: &str| AppSlug::parse(s).unwrap();
        let spec = PolicySpec {
            name: crate::domain::PolicyName::parse("p").unwrap(),
            owner_app: slug("blog"),
            algorithm: crate::domain::Algorithm::TokenBucket,
            rate: Some(crate::domain::Rate::parse_field("rate", 1.0).unwrap()),
            max_permits: crate::domain::MaxPermits::parse_field("max_permits", 1).unwrap(),
            window_ms: None,
            lease_ttl_ms: None,
            allowed_apps: vec![slug("shop"), slug("blog"), slug("cart")],
            failure_mode: crate::domain::FailureMode::Closed,
            enabled: true,
            mode: crate::domain::Mode::Enforce,
            description: String::new(),
            scope: Scope::Global,
            overrides: Vec::new(),
            descriptors: Vec::new(),
            units: crate::domain::DisplayUnits::default(),
        };
        let renamed = replaced(&spec, &slug("shop"), Some(&slug("cart")));
        assert_eq!(renamed.allowed_apps, [slug("cart"), slug("blog")]);
        assert_eq!(renamed.owner_app, slug("blog"));
        let deleted = replaced(&spec, &slug("shop"), None);
        assert_eq!(deleted.allowed_apps, [slug("blog"), slug("cart")]);
    }
}
