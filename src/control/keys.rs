use serde_json::json;

use crate::auth::{Actor, Permission, Secret, SecretKind};
use crate::domain::FieldErrors;
use crate::store::AuditEntry;

use super::inputs::{KeyInput, required, text};
use super::{ApiKeyView, Control, ControlError, ControlResult, CreatedKey, authorised_app};

impl Control {
    /// A new API key for the application; its text is in the reply and nowhere else.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn create_key(
        &self,
        actor: &Actor,
        slug: &str,
        input: KeyInput,
    ) -> ControlResult<CreatedKey> {
        let mut errors = FieldErrors::default();
        let label = required(&mut errors, "label", &input.label)
            .and_then(|l| errors.check(text("label", &l, 200)));
        let Some(label) = label else {
            return Err(ControlError::Invalid(errors));
        };

        let secret = Secret::generate(SecretKind::ApiKey);
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let record = tx
            .insert_api_key(&app.id, &label, &secret.hash, &actor.name)
            .await?;
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(&app.slug),
            entity_type: "api_key",
            entity_id: &record.id,
            action: "create",
            before: None,
            after: Some(json!(ApiKeyView::from(&record))),
        })
        .await?;
        tx.commit().await?;
        self.reload_keys().await;
        Ok(CreatedKey {
            id: record.id,
            label: record.label,
            key: secret.expose().to_owned(),
        })
    }

    /// Revokes a key; it stops working on this instance at once, on others by the next
    /// reconcile pass.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, key_id = %key_id))]
    pub async fn revoke_key(&self, actor: &Actor, slug: &str, key_id: &str) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        // Ids are 16 hex characters; anything else names no key.
        if key_id.len() != 16 || !key_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ControlError::NotFound("api key"));
        }
        let before = tx
            .revoke_api_key(&app.id, key_id)
            .await?
            .ok_or(ControlError::NotFound("api key"))?;
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(&app.slug),
            entity_type: "api_key",
            entity_id: key_id,
            action: "revoke",
            before: Some(json!(ApiKeyView::from(&before))),
            after: None,
        })
        .await?;
        tx.commit().await?;
        self.reload_keys().await;
        Ok(())
    }

    async fn reload_keys(&self) {
        if let Err(e) = self.sync.keys_changed().await {
            tracing::warn!(error = %e, "reloading api keys failed; reconcile will retry");
        }
    }
}
