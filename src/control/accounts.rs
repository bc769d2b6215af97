//! Users' accounts: sign-in, console sessions, password changes, and the admins' user
//! management (global role, disabling, password resets). Each change is audited.

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::auth::{Actor, Secret, SecretKind, hash_password, hash_secret, verify_password};
use crate::domain::{FieldErrors, Username};
use crate::store::{AuditEntry, SessionRecord, UserRecord, now_ms};

use super::users::check_new_password;
use super::{Control, ControlError, ControlResult};

/// How long a console session lasts after sign-in.
pub const SESSION_LIFETIME_MS: i64 = 12 * 60 * 60 * 1000;

/// A session just started: the cookie's token, shown once, to its owner.
pub struct NewSession {
    pub token: SecretString,
    pub expires_ms: i64,
}

/// What an admin may change of a user.
#[derive(Debug, Clone, Copy)]
pub struct UserFlags {
    pub is_admin: bool,
    pub disabled: bool,
}

/// Who sets a password, and so what else ends with the old one.
enum Reset {
    /// The user themselves: their other sessions end (this one may stay); their access
    /// tokens stay, being theirs.
    Own { keep_session: Option<String> },
    /// An admin: every session ends and every access token is revoked.
    ByAdmin,
}

impl Control {
    /// The user, when `password` is theirs and the account is enabled. An unknown user
    /// and a disabled one cost one argon2 verification like a wrong password, so the
    /// answer time tells nothing.
    #[tracing::instrument(level = "debug", skip_all, fields(username = %username))]
    pub async fn check_password(
        &self,
        username: &str,
        password: SecretString,
    ) -> ControlResult<Option<UserRecord>> {
        // A name no user can have (a NUL, which PostgreSQL refuses) is an unknown user,
        // checked against the dummy hash like any other.
        let user = match self.user_named(username).await {
            Ok(user) => Some(user),
            Err(ControlError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        let stored = user.as_ref().map(|u| u.password_hash.clone());
        let matches = verify_password(password, stored)
            .await
            .map_err(|e| ControlError::Internal(e.into()))?;
        Ok(user.filter(|u| matches && !u.is_disabled()))
    }

    /// A new session for `user`: a fresh token each sign-in, so a token planted in a
    /// browser before sign-in (session fixation) is never promoted.
    #[tracing::instrument(skip_all, fields(user = %user.username))]
    pub async fn start_session(&self, user: &UserRecord) -> ControlResult<NewSession> {
        let token = Secret::generate(SecretKind::Session);
        let csrf = Secret::generate(SecretKind::Session);
        let expires_ms = now_ms() + SESSION_LIFETIME_MS;
        let mut tx = self.store.begin().await?;
        tx.insert_session(&token.hash, &user.id, &csrf.hash, expires_ms)
            .await?;
        tx.commit().await?;
        Ok(NewSession {
            token: token.plain,
            expires_ms,
        })
    }

    /// The live session of a presented cookie token.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn session(&self, token: &SecretString) -> ControlResult<Option<SessionRecord>> {
        let mut tx = self.store.begin_read().await?;
        let session = tx.session(&hash_secret(token.expose_secret())).await?;
        tx.commit().await?;
        Ok(session)
    }

    #[tracing::instrument(skip_all)]
    pub async fn end_session(&self, token: &SecretString) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        tx.delete_session(&hash_secret(token.expose_secret()))
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The actor's own password, after checking the current one. Their other sessions
    /// end; the one in use (`keep_session`) stays.
    #[tracing::instrument(skip_all, fields(actor = %actor.name))]
    pub async fn change_own_password(
        &self,
        actor: &Actor,
        current: SecretString,
        new: SecretString,
        confirm: &SecretString,
        keep_session: Option<&SecretString>,
    ) -> ControlResult<()> {
        let user_id = actor.user_id.as_deref().ok_or(ControlError::Forbidden)?;
        let mut tx = self.store.begin_read().await?;
        let user = tx
            .user_by_id(user_id)
            .await?
            .ok_or(ControlError::NotFound("user"))?;
        tx.commit().await?;
        let matches = verify_password(current, Some(user.password_hash.clone()))
            .await
            .map_err(|e| ControlError::Internal(e.into()))?;
        // Every field's error at once: a wrong current password, a new one too short, a
        // confirmation that differs.
        let mut errors = FieldErrors::default();
        if !matches {
            errors.push("current_password", "is not your current password");
        }
        if let Err(e) = check_new_password(&new) {
            errors.push("new_password", e.message);
        }
        if new.expose_secret() != confirm.expose_secret() {
            errors.push("confirm_password", "does not match the new password");
        }
        if !errors.0.is_empty() {
            return Err(errors.into());
        }
        let keep = keep_session.map(|token| hash_secret(token.expose_secret()));
        self.store_password(actor, &user, new, Reset::Own { keep_session: keep })
            .await
    }

    /// An admin sets another user's password; all of that user's sessions end and their
    /// access tokens are revoked (a reset answers a password someone else may know).
    #[tracing::instrument(skip_all, fields(actor = %actor.name, username = %username))]
    pub async fn reset_password(
        &self,
        actor: &Actor,
        username: &str,
        new: SecretString,
    ) -> ControlResult<()> {
        if !actor.is_admin {
            return Err(ControlError::Forbidden);
        }
        let user = self.user_named(username).await?;
        self.store_password(actor, &user, new, Reset::ByAdmin).await
    }

    async fn store_password(
        &self,
        actor: &Actor,
        user: &UserRecord,
        new: SecretString,
        reset: Reset,
    ) -> ControlResult<()> {
        check_new_password(&new)?;
        let hash = hash_password(new)
            .await
            .map_err(|e| ControlError::Internal(e.into()))?;
        let mut tx = self.store.begin().await?;
        tx.set_password_hash(&user.id, &hash).await?;
        let (keep_session, after) = match reset {
            Reset::Own { keep_session } => (keep_session, None),
            Reset::ByAdmin => {
                let revoked = tx.revoke_access_tokens_of_user(&user.id).await?;
                (None, Some(json!({"access_tokens_revoked": revoked})))
            }
        };
        tx.delete_sessions_of_user(&user.id, keep_session.as_deref())
            .await?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: None,
            entity_type: "user",
            entity_id: &user.username,
            action: "set_password",
            before: None,
            after,
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every user, for admins.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn list_users(&self, actor: &Actor) -> ControlResult<Vec<UserRecord>> {
        if !actor.is_admin {
            return Err(ControlError::Forbidden);
        }
        let mut tx = self.store.begin_read().await?;
        let users = tx.list_users().await?;
        tx.commit().await?;
        Ok(users)
    }

    /// Sets a user's global role and disabled flag. A disabled user's sessions end at
    /// once; the last enabled admin can be neither demoted nor disabled (nobody could
    /// manage users any more).
    #[tracing::instrument(skip_all, fields(actor = %actor.name, username = %username, admin = flags.is_admin, disabled = flags.disabled))]
    pub async fn set_user_flags(
        &self,
        actor: &Actor,
        username: &str,
        flags: UserFlags,
    ) -> ControlResult<()> {
        if !actor.is_admin {
            return Err(ControlError::Forbidden);
        }
        let username = Username::parse(username).map_err(|_| ControlError::NotFound("user"))?;
        let mut tx = self.store.begin().await?;
        let user = tx
            .user_by_name(username.as_str())
            .await?
            .ok_or(ControlError::NotFound("user"))?;
        let before = UserFlags {
            is_admin: user.is_admin(),
            disabled: user.is_disabled(),
        };
        let loses_admin =
            before.is_admin && !before.disabled && (!flags.is_admin || flags.disabled);
        if loses_admin && tx.count_active_admins().await? <= 1 {
            return Err(ControlError::Conflict(format!(
                "{} is the last enabled admin; make another admin first",
                user.username
            )));
        }
        tx.set_user_flags(&user.id, flags.is_admin, flags.disabled)
            .await?;
        if flags.disabled {
            tx.delete_sessions_of_user(&user.id, None).await?;
        }
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: None,
            entity_type: "user",
            entity_id: &user.username,
            action: "update",
            before: Some(json!({"admin": before.is_admin, "disabled": before.disabled})),
            after: Some(json!({"admin": flags.is_admin, "disabled": flags.disabled})),
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn user_named(&self, username: &str) -> ControlResult<UserRecord> {
        // A string that cannot be a username names no user (and never reaches SQL).
        let username = Username::parse(username).map_err(|_| ControlError::NotFound("user"))?;
        let mut tx = self.store.begin_read().await?;
        let user = tx.user_by_name(username.as_str()).await?;
        tx.commit().await?;
        user.ok_or(ControlError::NotFound("user"))
    }
}
