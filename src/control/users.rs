use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::auth::{Actor, Secret, SecretKind, hash_password};
use crate::domain::{FieldError, FieldErrors, Username};
use crate::store::{AuditEntry, StoreError, TokenOwner, UserRecord};

use super::{Control, ControlError, ControlResult};

pub const MIN_PASSWORD_CHARS: usize = 8;

/// The one rule a new password must meet, for new users, resets and changes alike.
pub(super) fn check_new_password(password: &SecretString) -> Result<(), FieldError> {
    if password.expose_secret().chars().count() < MIN_PASSWORD_CHARS {
        Err(FieldError::new(
            "password",
            format!("must be at least {MIN_PASSWORD_CHARS} characters"),
        ))
    } else {
        Ok(())
    }
}

impl Control {
    #[tracing::instrument(skip_all, fields(actor = %actor.name, username = %username, admin = is_admin))]
    pub async fn create_user(
        &self,
        actor: &Actor,
        username: &str,
        password: SecretString,
        is_admin: bool,
    ) -> ControlResult<UserRecord> {
        if !actor.is_admin {
            return Err(ControlError::Forbidden);
        }
        // Both fields' errors at once.
        let (username, password_ok) = (Username::parse(username), check_new_password(&password));
        let username = match (username, password_ok) {
            (Ok(username), Ok(())) => username,
            (username, password_ok) => {
                let errors = [username.err(), password_ok.err()];
                return Err(FieldErrors(errors.into_iter().flatten().collect()).into());
            }
        };
        let hash = hash_password(password)
            .await
            .map_err(|e| ControlError::Internal(e.into()))?;
        let mut tx = self.store.begin().await?;
        let user = match tx.insert_user(&username, &hash, is_admin).await {
            Err(StoreError::Conflict) => {
                return Err(ControlError::Conflict(format!(
                    "user {username} already exists"
                )));
            }
            other => other?,
        };
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: None,
            entity_type: "user",
            entity_id: &user.username,
            action: "create",
            before: None,
            after: Some(json!({"username": user.username, "admin": is_admin})),
        })
        .await?;
        tx.commit().await?;
        Ok(user)
    }

    /// The user a presented access token belongs to, if the token is live (neither
    /// revoked nor expired) and the user enabled; read-only if the token is.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn actor_for_token(
        &self,
        presented: &str,
    ) -> ControlResult<Result<Actor, TokenRefused>> {
        let hash = crate::auth::hash_secret(presented);
        let mut tx = self.store.begin().await?;
        let owner = tx.token_owner(&hash).await?;
        tx.commit().await?;
        Ok(match owner {
            None => Err(TokenRefused::Unknown),
            Some(TokenOwner {
                expired_at: Some(at_ms),
                ..
            }) => Err(TokenRefused::Expired { at_ms }),
            Some(owner) => {
                let actor = Actor::from_user(&owner.user, crate::auth::Source::Api);
                Ok(if owner.read_only {
                    actor.reading_only()
                } else {
                    actor
                })
            }
        })
    }

    /// At first start with no user at all: an `admin` with a random password, returned
    /// so the caller prints it once. `None` when users exist.
    #[tracing::instrument(skip_all)]
    pub async fn bootstrap_admin(&self) -> ControlResult<Option<SecretString>> {
        let mut tx = self.store.begin().await?;
        let count = tx.count_users().await?;
        tx.commit().await?;
        if count > 0 {
            return Ok(None);
        }
        let secret = Secret::generate(SecretKind::AccessToken);
        let password = SecretString::from(secret.expose()["rk_pat_".len()..].to_owned());
        match self
            .create_user(&Actor::operator(), "admin", password.clone(), true)
            .await
        {
            Ok(_) => Ok(Some(password)),
            // Another instance starting at the same moment made it first.
            Err(ControlError::Conflict(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Why a presented access token is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRefused {
    /// No such token, revoked, or its user disabled.
    Unknown,
    Expired {
        at_ms: i64,
    },
}
