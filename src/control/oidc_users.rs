//! Who a person the OpenID Connect provider signed in is here: the user linked to their
//! subject (`sub`), or a new one named by their `preferred_username` at their first
//! sign-in. Never a user found by name alone: a provider's "admin" must not become the
//! local admin, so a name already taken is refused until an admin links the two.

use secrecy::SecretString;
use serde_json::json;

use crate::auth::Actor;
use crate::auth::hash_password;
use crate::auth::oidc::claims::IdClaims;
use crate::auth::{Secret, SecretKind};
use crate::domain::{FieldError, FieldErrors, Username};
use crate::store::{AuditEntry, Author, UserRecord};

use super::{Control, ControlError, ControlResult};

/// Why the person the provider signed in may not sign in here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcRefused {
    #[error("the account {0} is disabled; an admin can enable it under Users")]
    Disabled(String),
    #[error(
        "a ratekeeper user named {name} already exists and is not linked to your sign-in; \
         if it is yours, an operator links it with `ratekeeper user link-oidc {name} {sub}`"
    )]
    NameTaken { name: String, sub: String },
    #[error(
        "your identity provider names you {0:?}, which cannot be a ratekeeper username \
         (a-z, 0-9, '.', '_' and '-', at most 64 characters)"
    )]
    NoUsableName(String),
}

impl Control {
    /// The user the provider's `claims` are, made at their first sign-in; with
    /// `admin_group`, an admin exactly while the `groups` claim holds it.
    #[tracing::instrument(skip_all, fields(sub = %claims.sub))]
    pub async fn oidc_user(
        &self,
        claims: &IdClaims,
        admin_group: Option<&str>,
    ) -> ControlResult<Result<UserRecord, OidcRefused>> {
        let wants_admin = admin_group.map(|group| claims.groups.iter().any(|g| g == group));
        let mut tx = self.store.begin().await?;
        if let Some(mut user) = tx.user_by_oidc_sub(&claims.sub).await? {
            if user.is_disabled() {
                return Ok(Err(OidcRefused::Disabled(user.username)));
            }
            if let Some(admin) = wants_admin
                && admin != user.is_admin()
            {
                tx.set_user_flags(&user.id, admin, false).await?;
                tx.record_audit(AuditEntry {
                    actor: provider_author(&user.username),
                    app_slug: None,
                    entity_type: "user",
                    entity_id: &user.username,
                    action: "update",
                    before: Some(json!({"admin": user.is_admin()})),
                    after: Some(json!({"admin": admin, "by": "the identity provider's groups"})),
                })
                .await?;
                user.is_admin = i64::from(admin);
            }
            tx.commit().await?;
            return Ok(Ok(user));
        }
        let wanted = claims.preferred_username.clone().unwrap_or_default();
        let Ok(username) = Username::parse(&wanted.trim().to_lowercase()) else {
            return Ok(Err(OidcRefused::NoUsableName(wanted)));
        };
        if tx.user_by_name(username.as_str()).await?.is_some() {
            return Ok(Err(OidcRefused::NameTaken {
                name: username.to_string(),
                sub: claims.sub.clone(),
            }));
        }
        // No password signs in as this user: the hash of a random one nobody saw.
        let unusable = SecretString::from(Secret::generate(SecretKind::Session).hash);
        let hash = hash_password(unusable)
            .await
            .map_err(|e| ControlError::Internal(e.into()))?;
        let admin = wants_admin.unwrap_or(false);
        let user = tx.insert_user(&username, &hash, admin).await?;
        tx.set_oidc_sub(&user.id, &claims.sub).await?;
        tx.record_audit(AuditEntry {
            actor: provider_author(&user.username),
            app_slug: None,
            entity_type: "user",
            entity_id: &user.username,
            action: "create",
            before: None,
            after: Some(
                json!({"username": user.username, "admin": admin, "signed_in_with": "oidc"}),
            ),
        })
        .await?;
        tx.commit().await?;
        Ok(Ok(user))
    }
}

/// Changes the provider's word makes are the signing-in user's, from the console.
fn provider_author(username: &str) -> Author<'_> {
    Author {
        name: username,
        source: "console",
        change_set: None,
    }
}

impl Control {
    /// Links the user `username` to the provider's subject `sub`: that person signs in as
    /// this user from then on (an operator's or an admin's decision, audited).
    #[tracing::instrument(skip_all, fields(actor = %actor.name, username = %username))]
    pub async fn link_oidc_user(
        &self,
        actor: &Actor,
        username: &str,
        sub: &str,
    ) -> ControlResult<()> {
        if !actor.is_admin {
            return Err(ControlError::Forbidden);
        }
        let sub = sub.trim();
        if sub.is_empty() || sub.len() > 255 || sub.chars().any(char::is_control) {
            return Err(ControlError::Invalid(FieldErrors(vec![FieldError::new(
                "sub",
                "must be the provider's subject: 1 to 255 characters, no control characters",
            )])));
        }
        let mut tx = self.store.begin().await?;
        let user = tx
            .user_by_name(username)
            .await?
            .ok_or(ControlError::NotFound("user"))?;
        if let Some(other) = tx.user_by_oidc_sub(sub).await?
            && other.id != user.id
        {
            return Err(ControlError::Conflict(format!(
                "the provider's {sub:?} signs in as {} already",
                other.username
            )));
        }
        tx.set_oidc_sub(&user.id, sub).await?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: None,
            entity_type: "user",
            entity_id: &user.username,
            action: "link_oidc",
            before: None,
            after: Some(json!({"oidc_sub": sub})),
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// How long a sign-in begun at the provider may take to come back.
pub const OIDC_SIGN_IN_MS: i64 = 10 * 60 * 1000;

impl Control {
    /// Keeps a sign-in begun, under the hash of its `state`, for the browser's return.
    pub async fn keep_oidc_sign_in(
        &self,
        state: &str,
        record: &crate::store::OidcSignInRecord,
    ) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        tx.insert_oidc_sign_in(
            &crate::auth::hash_secret(state),
            record,
            crate::store::now_ms() - OIDC_SIGN_IN_MS,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The sign-in the browser's `state` names, taken once, if it was begun here within
    /// [`OIDC_SIGN_IN_MS`].
    pub async fn take_oidc_sign_in(
        &self,
        state: &str,
    ) -> ControlResult<Option<crate::store::OidcSignInRecord>> {
        let mut tx = self.store.begin().await?;
        let found = tx
            .take_oidc_sign_in(&crate::auth::hash_secret(state))
            .await?;
        tx.commit().await?;
        let fresh_since = crate::store::now_ms() - OIDC_SIGN_IN_MS;
        Ok(found.filter(|r| r.created_ms >= fresh_since))
    }
}
