//! A user's own personal access tokens, from the console: listed (never their text),
//! made (the text shown once) and revoked. The CLI makes them with `create_token`.

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::auth::{Actor, Secret, SecretKind};
use crate::domain::{FieldErrors, Username, rfc3339};
use crate::store::{AccessTokenRecord, AuditEntry, TokenTerms, Tx};

use super::inputs::{TokenInput, future_expiry, required, text};
use super::reveal::{Reveal, Revealed};
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
    /// A new personal access token for `username`, as `input` asks; its text is returned
    /// once.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, username = %username))]
    pub async fn create_token(
        &self,
        actor: &Actor,
        username: &str,
        input: &TokenInput,
    ) -> ControlResult<SecretString> {
        let (label, terms) = validated(input)?;
        let mut tx = self.store.begin().await?;
        let (_, secret) = insert_token(&mut tx, actor, username, &label, terms).await?;
        tx.commit().await?;
        Ok(secret)
    }

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

/// A new token for `username` in `tx`, with its audit event: its id and text.
pub(super) async fn insert_token(
    tx: &mut Tx,
    actor: &Actor,
    username: &str,
    label: &str,
    terms: TokenTerms,
) -> ControlResult<(String, SecretString)> {
    let username = Username::parse(username).map_err(|_| ControlError::NotFound("user"))?;
    let user = tx
        .user_by_name(username.as_str())
        .await?
        .ok_or(ControlError::NotFound("user"))?;
    if !actor.is_admin && actor.user_id.as_deref() != Some(&user.id) {
        return Err(ControlError::Forbidden);
    }
    if user.is_disabled() {
        return Err(ControlError::Conflict(format!(
            "user {username} is disabled"
        )));
    }
    let secret = Secret::generate(SecretKind::AccessToken);
    let token_id = tx
        .insert_access_token(&user.id, label, &secret.hash, terms)
        .await?;
    tx.record_audit(AuditEntry {
        actor: actor.author(),
        app_slug: None,
        entity_type: "access_token",
        entity_id: &token_id,
        action: "create",
        before: None,
        after: Some(json!({
            "user": user.username,
            "label": label,
            "expires_at": terms.expires_ms.map(rfc3339),
            "read_only": terms.read_only,
        })),
    })
    .await?;
    Ok((token_id, secret.plain))
}
