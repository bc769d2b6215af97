//! A user's own personal access tokens, from the console: listed (never their text),
//! made (the text shown once) and revoked. The CLI makes them with `create_token`.

use secrecy::ExposeSecret;
use serde_json::json;

use crate::auth::Actor;
use crate::domain::FieldErrors;
use crate::store::{AccessTokenRecord, AuditEntry};

use super::inputs::{TokenInput, required, text};
use super::reveal::{Reveal, Revealed};
use super::users::insert_token;
use super::{Control, ControlError, ControlResult};

impl Control {
    /// The actor's live tokens.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn list_own_tokens(&self, actor: &Actor) -> ControlResult<Vec<AccessTokenRecord>> {
        let user_id = actor.user_id.as_deref().ok_or(ControlError::Forbidden)?;
        let mut tx = self.store.begin_read().await?;
        let tokens = tx.list_access_tokens(user_id).await?;
        tx.commit().await?;
        Ok(tokens)
    }

    /// A new token for the actor, labelled; its text goes where `reveal` says.
    #[tracing::instrument(skip_all, fields(actor = %actor.name))]
    pub async fn create_own_token(
        &self,
        actor: &Actor,
        input: TokenInput,
        reveal: Reveal<'_>,
    ) -> ControlResult<Revealed> {
        let mut errors = FieldErrors::default();
        let label = required(&mut errors, "label", &input.label)
            .and_then(|l| errors.check(text("label", &l, 200)));
        let Some(label) = label else {
            return Err(ControlError::Invalid(errors));
        };
        let mut tx = self.store.begin().await?;
        let (token_id, secret) = insert_token(&mut tx, actor, &actor.name, &label).await?;
        let revealed = Revealed::AccessToken {
            id: token_id,
            label,
            token: secret.expose_secret().to_owned(),
        };
        reveal.keep(&mut tx, &revealed).await?;
        tx.commit().await?;
        Ok(revealed)
    }

    /// Revokes one of the actor's own tokens; it stops working at once.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, token_id = %token_id))]
    pub async fn revoke_own_token(&self, actor: &Actor, token_id: &str) -> ControlResult<()> {
        let user_id = actor.user_id.as_deref().ok_or(ControlError::Forbidden)?;
        if token_id.len() != 16 || !token_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ControlError::NotFound("access token"));
        }
        let mut tx = self.store.begin().await?;
        let before = tx
            .revoke_access_token(user_id, token_id)
            .await?
            .ok_or(ControlError::NotFound("access token"))?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: None,
            entity_type: "access_token",
            entity_id: token_id,
            action: "revoke",
            before: Some(json!({"user": actor.name, "label": before.label})),
            after: None,
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
