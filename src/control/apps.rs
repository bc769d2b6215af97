use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{AppSlug, FieldErrors, check_description};
use crate::store::AuditEntry;

use super::inputs::{AppInput, required, text};
use super::{
    ApiKeyView, AppDetail, AppView, Control, ControlError, ControlResult, MemberView, PolicyView,
    app_access,
};
use crate::store::{AppRecord, Tx};

/// A policy's name and scope: what reading its live state needs.
#[derive(Debug, Clone)]
pub struct PolicyScope {
    pub name: String,
    pub scope: crate::domain::Scope,
}

/// See [`Control::app_with_limits`].
pub struct AppWithLimits {
    pub detail: AppDetail,
    /// Policies of other applications that allow this one.
    pub limits_on_app: Vec<PolicyView>,
}

/// The application `slug` with its members and keys, if `actor` may see it.
async fn app_detail(
    tx: &mut Tx,
    actor: &Actor,
    slug: &str,
) -> ControlResult<(AppRecord, AppDetail)> {
    let (app, role) = app_access(tx, actor, slug, Permission::View).await?;
    let members = tx.list_members(&app.id).await?;
    let keys = tx.list_api_keys(&app.id).await?;
    let your_role = match (actor.is_admin, role) {
        (true, _) => "admin",
        (false, Some(role)) => role.as_str(),
        (false, None) => "",
    };
    let detail = AppDetail {
        app: AppView::from(&app),
        your_role: your_role.to_owned(),
        may_edit: actor.may(role, Permission::Edit),
        members: members.iter().map(MemberView::from).collect(),
        keys: keys.iter().map(ApiKeyView::from).collect(),
    };
    Ok((app, detail))
}

impl Control {
    /// Applications are made by admins; their owners run them from then on.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = ?input.slug))]
    pub async fn create_app(&self, actor: &Actor, input: AppInput) -> ControlResult<AppView> {
        if !actor.is_admin {
            return Err(ControlError::Forbidden);
        }
        let mut errors = FieldErrors::default();
        let slug = required(&mut errors, "slug", &input.slug)
            .and_then(|s| errors.check(AppSlug::parse(&s)));
        let name = required(&mut errors, "name", &input.name)
            .and_then(|n| errors.check(text("name", &n, 200)));
        let description = errors.check(check_description(
            "description",
            input.description.as_deref().unwrap_or(""),
        ));
        errors.clone().into_result()?;
        let (Some(slug), Some(name), Some(description)) = (slug, name, description) else {
            return Err(ControlError::Invalid(errors));
        };

        let mut tx = self.store.begin().await?;
        let app = match tx.insert_app(&slug, &name, &description).await {
            Err(crate::store::StoreError::Conflict) => {
                return Err(ControlError::Conflict(format!(
                    "an application with slug {:?} already exists",
                    slug.as_str()
                )));
            }
            other => other?,
        };
        let view = AppView::from(&app);
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "app",
            entity_id: &app.slug,
            action: "create",
            before: None,
            after: Some(json!(view)),
        })
        .await?;
        tx.commit().await?;
        Ok(view)
    }

    /// Every application, for choosing a policy's allowed applications: a policy may let
    /// any application acquire, not only those its owners belong to, so its owners (and
    /// only they) see every slug and name.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn allowed_app_choices(
        &self,
        actor: &Actor,
        slug: &str,
    ) -> ControlResult<Vec<AppView>> {
        let mut tx = self.store.begin_read().await?;
        app_access(&mut tx, actor, slug, Permission::Edit).await?;
        let apps = tx.list_apps().await?;
        tx.commit().await?;
        Ok(apps.iter().map(AppView::from).collect())
    }

    /// The applications the actor may see: all for admins, their own for members.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn list_apps(&self, actor: &Actor) -> ControlResult<Vec<AppView>> {
        let mut tx = self.store.begin_read().await?;
        let apps = match (&actor.user_id, actor.is_admin) {
            (_, true) => tx.list_apps().await?,
            (Some(user_id), false) => tx.list_apps_of_user(user_id).await?,
            (None, false) => Vec::new(),
        };
        tx.commit().await?;
        Ok(apps.iter().map(AppView::from).collect())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn get_app(&self, actor: &Actor, slug: &str) -> ControlResult<AppDetail> {
        let mut tx = self.store.begin_read().await?;
        let (_, detail) = app_detail(&mut tx, actor, slug).await?;
        tx.commit().await?;
        Ok(detail)
    }

    /// The names and scopes of an application's policies (by name), for those who may
    /// see it: a small read, so that their live state can be asked of Redis while the
    /// rest of the page is read from the database.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn policy_scopes(
        &self,
        actor: &Actor,
        slug: &str,
    ) -> ControlResult<Vec<PolicyScope>> {
        let mut tx = self.store.begin_read().await?;
        let (app, _) = app_access(&mut tx, actor, slug, Permission::View).await?;
        let scopes = tx.policy_scopes(&app.id).await?;
        tx.commit().await?;
        Ok(scopes
            .into_iter()
            .map(|(name, scope)| PolicyScope { name, scope })
            .collect())
    }

    /// What an application's page shows from the database besides its policies' rows,
    /// in one transaction: the application with its members and keys, and the policies
    /// of other applications that allow it.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn app_with_limits(&self, actor: &Actor, slug: &str) -> ControlResult<AppWithLimits> {
        let mut tx = self.store.begin_read().await?;
        let (app, detail) = app_detail(&mut tx, actor, slug).await?;
        let allowing = tx.policies_allowing(&app.slug).await?;
        tx.commit().await?;
        Ok(AppWithLimits {
            detail,
            limits_on_app: allowing.iter().map(PolicyView::from).collect(),
        })
    }

    /// The policies of an application among `names` (at most a page's), by name, for
    /// those who may see it.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn policies_named(
        &self,
        actor: &Actor,
        slug: &str,
        names: &[&str],
    ) -> ControlResult<Vec<PolicyView>> {
        let mut tx = self.store.begin_read().await?;
        let (app, _) = app_access(&mut tx, actor, slug, Permission::View).await?;
        let records = tx.policies_named(&app.id, names).await?;
        tx.commit().await?;
        Ok(records.iter().map(PolicyView::from).collect())
    }

    /// Whether `actor` may change the policies of any application: a policy file of
    /// anyone else is refused before it is read.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn may_edit_any_app(&self, actor: &Actor) -> ControlResult<bool> {
        let Some(user_id) = actor.user_id.as_ref().filter(|_| !actor.is_admin) else {
            return Ok(actor.is_admin);
        };
        let mut tx = self.store.begin_read().await?;
        let roles = tx.roles_of_user(user_id).await?;
        tx.commit().await?;
        Ok(roles
            .into_iter()
            .any(|(_, role)| actor.may(role, Permission::Edit)))
    }

    /// The slugs of the applications whose policies `actor` may change (every one for
    /// an admin), by slug: what a policy file of theirs may touch.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn editable_apps(&self, actor: &Actor) -> ControlResult<Vec<String>> {
        let mut tx = self.store.begin_read().await?;
        let slugs = match (&actor.user_id, actor.is_admin) {
            (_, true) => tx.list_apps().await?.into_iter().map(|a| a.slug).collect(),
            (Some(user_id), false) => tx
                .roles_of_user(user_id)
                .await?
                .into_iter()
                .filter(|(_, role)| actor.may(*role, Permission::Edit))
                .map(|(slug, _)| slug)
                .collect(),
            (None, false) => Vec::new(),
        };
        tx.commit().await?;
        Ok(slugs)
    }
}
