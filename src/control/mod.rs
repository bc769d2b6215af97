//! Control operations: every read and change of apps, members, keys, policies, users and
//! the audit log, each checked against the permission rules and each change audited in
//! the same transaction. The JSON API, the CLI and the console all call these, so one
//! set of rules serves them all. Handlers parse and render; the decisions are here.

mod accounts;
mod app_lifecycle;
mod apply;
pub use apply::ApplyError;
mod apps;
pub use apps::{AppPolicies, AppWithLimits, PolicyScope};
mod audit;
pub use audit::AuditPage;
mod buckets;
mod deleted_policies;
pub use deleted_policies::DeletedPolicy;
mod descriptors;
mod desired;
mod flashes;
mod inputs;
mod keys;
mod live;
mod members;
mod oidc_users;
pub use oidc_users::OidcRefused;
mod overrides;
mod plan;
mod plan_id;
mod policies;
mod policy_checks;
mod policy_diff;
mod policy_history;
mod policy_spec;
mod reveal;
mod tokens;
mod users;
mod views;
mod webhooks;
pub use webhooks::{
    AttemptView, CreatedWebhook, DEFAULT_QUIET_PERIOD_S, DeliveryView, WebhookInput, WebhookView,
};

pub use accounts::{NewSession, SESSION_LIFETIME_MS, UserFlags};
pub use buckets::{TOP_MAX_MINUTES, TopCallers};
pub use descriptors::replace_texts;
pub use desired::{Desired, ERRORS_SHOWN};
pub use inputs::{
    AppInput, DescriptorInput, KeyInput, MemberInput, OverrideInput, PolicyInput, RollbackInput,
    RotateInput, TokenInput, not_null,
};
pub use keys::DEFAULT_OLD_KEY_GRACE_MS;
pub use live::{ACTIVITY_MINUTES, LivePolicy, TOP_SPANS};
pub use members::Ownerless;
pub use plan::{Plan, PlanAction, PlannedPolicy};
pub use policy_diff::{FieldChange, WrittenFields, field_changes};
pub use policy_history::{HISTORY_PAGE_SIZE, PolicyHistory};
pub use policy_spec::new_policy;
pub use reveal::{Reveal, Revealed};
pub use users::TokenRefused;
pub use views::{
    ApiKeyView, AppDetail, AppView, AuditView, CreatedKey, DescriptorView, MemberView,
    OverrideView, PolicyVersionView, PolicyView, RotatedKey, rfc3339,
};

use crate::auth::{Actor, Permission};
use crate::domain::{AppSlug, FieldError, FieldErrors, MemberRole};
use crate::store::{AppRecord, Store, StoreError, Tx};
use crate::sync::Syncer;
use ratekeeper_limiter::Limiter;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("not permitted")]
    Forbidden,
    #[error("invalid input: {0}")]
    Invalid(FieldErrors),
    #[error("{0}")]
    Conflict(String),
    /// The change would leave the application without an owner; `admin`: the actor is
    /// an admin, who may confirm it.
    #[error("this would leave {app} without an owner: make someone else owner first")]
    LastOwner { app: String, admin: bool },
    /// The application still owns policies, so it cannot be deleted.
    #[error("{app} owns {count} policies; delete them first (they are listed on its page)")]
    OwnsPolicies { app: String, count: i64 },
    #[error("the policy was changed meanwhile; its version is now {current}")]
    VersionConflict { current: i64 },
    #[error("redis is unavailable")]
    RedisUnavailable(#[source] anyhow::Error),
    #[error("the database is unavailable")]
    DatabaseUnavailable(#[source] anyhow::Error),
    /// A simultaneous change to the same rows made the database abort this one (a
    /// deadlock broken): nothing was saved, and trying again is safe.
    #[error(
        "a simultaneous change to the same records got in the way; nothing was saved: try again"
    )]
    Aborted(#[source] anyhow::Error),
    #[error(transparent)]
    Internal(anyhow::Error),
}

impl From<StoreError> for ControlError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict => Self::Conflict("already exists".into()),
            StoreError::Unavailable(e) => Self::DatabaseUnavailable(e.into()),
            StoreError::Aborted(e) => Self::Aborted(e.into()),
            StoreError::Other(e) => Self::Internal(e),
        }
    }
}

impl From<FieldErrors> for ControlError {
    fn from(e: FieldErrors) -> Self {
        Self::Invalid(e)
    }
}

impl From<FieldError> for ControlError {
    fn from(e: FieldError) -> Self {
        Self::Invalid(e.into())
    }
}

pub type ControlResult<T> = Result<T, ControlError>;

#[derive(Clone)]
pub struct Control {
    store: Store,
    sync: Syncer,
    limiter: Limiter,
    /// Webhooks may be sent to loopback and private addresses (tests, private networks).
    allow_private_receivers: bool,
}

impl Control {
    pub fn new(store: Store, sync: Syncer, limiter: Limiter) -> Self {
        Self {
            store,
            sync,
            limiter,
            allow_private_receivers: false,
        }
    }

    /// Lets webhooks be sent to loopback and private addresses.
    pub fn allowing_private_receivers(mut self, allow: bool) -> Self {
        self.allow_private_receivers = allow;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }
}

/// Loads an application and checks that `actor` may do `wanted` with it.
async fn authorised_app(
    tx: &mut Tx,
    actor: &Actor,
    slug: &str,
    wanted: Permission,
) -> ControlResult<AppRecord> {
    app_access(tx, actor, slug, wanted)
        .await
        .map(|(app, _)| app)
}

/// The application `slug`, if `actor` may see it; one they may not see is as unknown as
/// a slug that names nothing (same 404), so that which slugs exist is not theirs to
/// learn by asking.
async fn visible_app(
    tx: &mut Tx,
    actor: &Actor,
    slug: &str,
) -> ControlResult<(AppRecord, Option<MemberRole>)> {
    match app_access(tx, actor, slug, Permission::View).await {
        Err(ControlError::Forbidden) => Err(ControlError::NotFound("application")),
        found => found,
    }
}

/// [`authorised_app`], with the actor's role in the application (if a member).
async fn app_access(
    tx: &mut Tx,
    actor: &Actor,
    slug: &str,
    wanted: Permission,
) -> ControlResult<(AppRecord, Option<MemberRole>)> {
    // A string that cannot be a slug names no application (and never reaches SQL).
    let slug = AppSlug::parse(slug).map_err(|_| ControlError::NotFound("application"))?;
    let app = tx
        .app_by_slug(slug.as_str())
        .await?
        .ok_or(ControlError::NotFound("application"))?;
    let role = match &actor.user_id {
        Some(user_id) => tx.role_in_app(&app.id, user_id).await?,
        None => None,
    };
    if actor.may(role, wanted) {
        Ok((app, role))
    } else {
        Err(ControlError::Forbidden)
    }
}
