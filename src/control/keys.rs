use serde_json::json;

use crate::auth::{Actor, Permission, Secret, SecretKind};
use crate::domain::FieldErrors;
use crate::store::{AuditEntry, KeyGrant, now_ms};

use super::inputs::{KeyInput, RotateInput, date_time, future_expiry, required, text};
use super::reveal::{Reveal, Revealed};
use super::views::rfc3339;
use super::{
    ApiKeyView, Control, ControlError, ControlResult, CreatedKey, RotatedKey, authorised_app,
};

/// How long a rotated key keeps working when the rotation does not say.
pub const DEFAULT_OLD_KEY_GRACE_MS: i64 = 24 * 60 * 60 * 1000;

impl Control {
    /// A new API key for the application; its text is in the reply (or on the next page,
    /// see [`Reveal`]) and nowhere else.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug))]
    pub async fn create_key(
        &self,
        actor: &Actor,
        slug: &str,
        input: KeyInput,
        reveal: Reveal<'_>,
    ) -> ControlResult<CreatedKey> {
        let mut errors = FieldErrors::default();
        let label = required(&mut errors, "label", &input.label)
            .and_then(|l| errors.check(text("label", &l, 200)));
        let expires_ms = future_expiry(&mut errors, input.expires_at.as_deref());
        errors.clone().into_result()?;
        let Some(label) = label else {
            return Err(ControlError::Invalid(errors));
        };

        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let (created, grant) = self
            .insert_key(&mut tx, actor, &app, &label, expires_ms, reveal)
            .await?;
        tx.commit().await?;
        if let Err(e) = self.sync.key_created(&grant).await {
            tracing::warn!(error = %e, "reloading api keys failed; reconcile will retry");
        }
        Ok(created)
    }

    /// Rotation: a new key with the old one's label, and the old one kept working until
    /// `old_key_expires_at` (24 hours by default; `"now"` ends it at once), so clients
    /// can move over without an outage. One audit event names both keys.
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, key_id = %key_id))]
    pub async fn rotate_key(
        &self,
        actor: &Actor,
        slug: &str,
        key_id: &str,
        input: RotateInput,
        reveal: Reveal<'_>,
    ) -> ControlResult<RotatedKey> {
        let now = now_ms();
        let mut errors = FieldErrors::default();
        let old_until = match input.old_key_expires_at.as_deref().map(str::trim) {
            None => Some(now + DEFAULT_OLD_KEY_GRACE_MS),
            Some("now") => Some(now),
            // A time already past means the same as "now": the old key stops at once.
            Some(at) => errors.check(date_time("old_key_expires_at", at).map(|t| t.max(now))),
        };
        let expires_ms = future_expiry(&mut errors, input.expires_at.as_deref());
        errors.clone().into_result()?;
        let Some(old_until) = old_until else {
            return Err(ControlError::Invalid(errors));
        };

        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let old = match valid_key_id(key_id) {
            true => tx.live_api_key(&app.id, key_id).await?,
            false => None,
        };
        let mut old = old.ok_or(ControlError::NotFound("api key"))?;
        if old.expires_ms.is_some_and(|at| at <= now) {
            return Err(ControlError::Conflict(format!(
                "key {:?} has expired; create a new key instead",
                old.label
            )));
        }
        // An old key that was to expire sooner keeps its own expiry.
        let old_until = old.expires_ms.map_or(old_until, |at| at.min(old_until));
        tx.set_api_key_expiry(&old.id, old_until).await?;
        let before = ApiKeyView::from(&old);
        old.expires_ms = Some(old_until);
        let label = old.label.clone();
        let (new_key, grant) = self
            .insert_key(&mut tx, actor, &app, &label, expires_ms, reveal)
            .await?;
        tx.set_api_key_replaced_by(&old.id, &new_key.id).await?;
        old.replaced_by = Some(new_key.id.clone());
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "api_key",
            entity_id: &old.id,
            action: "rotate",
            before: Some(json!(before)),
            after: Some(json!({"old_key": ApiKeyView::from(&old), "new_key_id": new_key.id})),
        })
        .await?;
        tx.commit().await?;
        if let Err(e) = self.sync.key_rotated(&grant).await {
            tracing::warn!(error = %e, "reloading api keys failed; reconcile will retry");
        }
        Ok(RotatedKey {
            new_key,
            old_key: ApiKeyView::from(&old),
        })
    }

    /// Stores a new key of `app` (with its audit event) in `tx`; gives back what is shown
    /// and what instances accept it by.
    async fn insert_key(
        &self,
        tx: &mut crate::store::Tx,
        actor: &Actor,
        app: &crate::store::AppRecord,
        label: &str,
        expires_ms: Option<i64>,
        reveal: Reveal<'_>,
    ) -> ControlResult<(CreatedKey, KeyGrant)> {
        let secret = Secret::generate(SecretKind::ApiKey);
        let record = tx
            .insert_api_key(
                &app.id,
                label,
                &secret.hash,
                secret.shown_prefix(),
                &actor.name,
                expires_ms,
            )
            .await?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "api_key",
            entity_id: &record.id,
            action: "create",
            before: None,
            after: Some(json!(ApiKeyView::from(&record))),
        })
        .await?;
        let created = CreatedKey {
            id: record.id,
            label: record.label,
            key: secret.expose().to_owned(),
            expires_at: record.expires_ms.map(rfc3339),
        };
        reveal
            .keep(
                tx,
                &Revealed::ApiKey {
                    id: created.id.clone(),
                    label: created.label.clone(),
                    key: created.key.clone(),
                    expires_at: created.expires_at.clone(),
                },
            )
            .await?;
        let grant = KeyGrant {
            key_hash: secret.hash,
            key_id: created.id.clone(),
            app_slug: app.slug.clone(),
            expires_ms: record.expires_ms,
            revoked_ms: None,
        };
        Ok((created, grant))
    }

    /// Revokes a key; it stops working on this instance at once, on the others as they
    /// hear the change notice (or else by the next reconcile pass).
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, key_id = %key_id))]
    pub async fn revoke_key(&self, actor: &Actor, slug: &str, key_id: &str) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        if !valid_key_id(key_id) {
            return Err(ControlError::NotFound("api key"));
        }
        let before = tx
            .revoke_api_key(&app.id, key_id)
            .await?
            .ok_or(ControlError::NotFound("api key"))?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
            app_slug: Some(&app.slug),
            entity_type: "api_key",
            entity_id: key_id,
            action: "revoke",
            before: Some(json!(ApiKeyView::from(&before))),
            after: None,
        })
        .await?;
        tx.commit().await?;
        self.withdraw_keys().await;
        Ok(())
    }

    /// After keys were revoked, or their application renamed or deleted.
    pub(super) async fn withdraw_keys(&self) {
        if let Err(e) = self.sync.keys_withdrawn().await {
            tracing::warn!(error = %e, "reloading api keys failed; reconcile will retry");
        }
    }
}

/// Ids are 16 hex characters; anything else names no key (and never reaches SQL).
fn valid_key_id(key_id: &str) -> bool {
    key_id.len() == 16 && key_id.bytes().all(|b| b.is_ascii_hexdigit())
}
