use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{Algorithm, AppSlug, FieldErrors, Scope, check_description};
use crate::store::AuditEntry;
use ratekeeper_limiter::{StateRead, StoredBucket};

use super::inputs::{AppInput, required, text};
use super::{
    ApiKeyView, AppDetail, AppView, Control, ControlError, ControlResult, MemberView, PolicyView,
    app_access,
};
use crate::store::{AppRecord, PolicyBrief, Tx};

/// A policy's name and scope, and how its live state is read.
#[derive(Debug, Clone)]
pub struct PolicyScope {
    pub name: String,
    pub scope: crate::domain::Scope,
    pub state_read: StateRead,
}

impl From<PolicyBrief> for PolicyScope {
    fn from(p: PolicyBrief) -> Self {
        Self {
            state_read: state_read(p.scope, p.algorithm, || StoredBucket {
                max_permits: p.max_permits,
                rate: p.rate,
                version: p.version,
                created_ms: p.created_ms,
            }),
            name: p.name,
            scope: p.scope,
        }
    }
}

/// How the live read finds the state of a policy of `scope` and `algorithm`: none for a
/// keyed one; a global token bucket's from its state key when `bucket` (as the database
/// holds it) last decided on it; any other's from its hash.
pub fn state_read(
    scope: Scope,
    algorithm: Algorithm,
    bucket: impl FnOnce() -> StoredBucket,
) -> StateRead {
    match (scope.is_keyed(), algorithm) {
        (true, _) => StateRead::Skip,
        (false, Algorithm::TokenBucket) => StateRead::TokenBucket(bucket()),
        (false, _) => StateRead::FromHash,
    }
}

/// An application's policies as [`Control::app_policies`] read them, with the read
/// transaction that reads the rows of some of them next.
pub struct AppPolicies {
    tx: Tx,
    app_id: String,
    pub scopes: Vec<PolicyScope>,
}

impl AppPolicies {
    /// The policies among `names` (at most a page's), by name, as the same transaction
    /// sees them; it ends here.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn named(mut self, names: &[&str]) -> ControlResult<Vec<PolicyView>> {
        let records = self.tx.policies_named(&self.app_id, names).await?;
        self.tx.commit().await?;
        Ok(records.iter().map(PolicyView::from).collect())
    }
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

    /// The names and scopes of an application's policies (by name), with how each one's
    /// live state is read, for those who may see it: a small read, so that their live
    /// state can be asked of Redis while the rest of the page is read from the database.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn policy_scopes(
        &self,
        actor: &Actor,
        slug: &str,
    ) -> ControlResult<Vec<PolicyScope>> {
        let table = self.app_policies(actor, slug).await?;
        let scopes = table.scopes;
        table.tx.commit().await?;
        Ok(scopes)
    }

    /// [`Self::policy_scopes`], in a read transaction kept open for the rows the page then
    /// shows ([`AppPolicies::named`]): the application and the actor's access are read once.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn app_policies(&self, actor: &Actor, slug: &str) -> ControlResult<AppPolicies> {
        let mut tx = self.store.begin_read().await?;
        let (app, _) = app_access(&mut tx, actor, slug, Permission::View).await?;
        let briefs = tx.policy_briefs(&app.id).await?;
        Ok(AppPolicies {
            tx,
            app_id: app.id,
            scopes: briefs.into_iter().map(PolicyScope::from).collect(),
        })
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
