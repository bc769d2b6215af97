//! A user's own personal access tokens, from the console: listed (never their text),
//! made (the text shown once) and revoked. The CLI makes them with `create_token`.

use secrecy::ExposeSecret;
use serde_json::json;

use crate::auth::Actor;
use crate::domain::FieldErrors;
use crate::store::{AccessTokenRecord, AuditEntry, TokenTerms};

use super::inputs::{TokenInput, future_expiry, required, text};
use super::reveal::{Reveal, Revealed};
use super::users::insert_token;
use super::{Control, ControlError, ControlResult};

/// A new token's label and terms, every error at once.
pub(super) fn validated(input: &TokenInput) -> ControlResult<(String, TokenTerms)> {
    let mut errors = FieldErrors::default();
    let label = required(&mut errors, "label", &input.label)
        .and_then(|l| errors.check(text("label", &l, 200)));
    let expires_ms = future_expiry(&mut errors, input.expires_at.as_deref());
    match label {
        Some(label) if errors.is_empty() => Ok((
            label,
            TokenTerms {
                expires_ms,
                read_only: input.read_only,
            },
        )),
        _ => Err(ControlError::Invalid(errors)),
    }
}

impl Control {
    /// The actor's live tokens (expired ones too, until revoked).
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
        let (label, terms) = validated(&input)?;
        let mut tx = self.store.begin().await?;
        let (token_id, secret) = insert_token(&mut tx, actor, &actor.name, &label, terms).await?;
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
