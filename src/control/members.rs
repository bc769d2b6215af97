use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{FieldError, MemberRole, Username};
use crate::store::AuditEntry;

use super::inputs::MemberInput;
use super::{Control, ControlError, ControlResult, MemberView, authorised_app};

impl Control {
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, username = %username))]
    pub async fn set_member(
        &self,
        actor: &Actor,
        slug: &str,
        username: &str,
        input: MemberInput,
    ) -> ControlResult<MemberView> {
        let role = match input.role.as_deref() {
            Some("owner") => MemberRole::Owner,
            Some("viewer") => MemberRole::Viewer,
            Some(_) => {
                return Err(FieldError::new("role", "must be \"owner\" or \"viewer\"").into());
            }
            None => return Err(FieldError::new("role", "is required").into()),
        };
        let username = Username::parse(username)?;
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let user = tx
            .user_by_name(username.as_str())
            .await?
            .ok_or(ControlError::NotFound("user"))?;
        let before = tx.set_membership(&app.id, &user.id, role).await?;
        let view = MemberView {
            username: user.username.clone(),
            role: role.as_str().to_owned(),
        };
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(&app.slug),
            entity_type: "member",
            entity_id: &user.username,
            action: if before.is_some() { "update" } else { "create" },
            before: before.map(|r| json!({"username": user.username, "role": r.as_str()})),
            after: Some(json!(view)),
        })
        .await?;
        tx.commit().await?;
        Ok(view)
    }

    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, username = %username))]
    pub async fn remove_member(
        &self,
        actor: &Actor,
        slug: &str,
        username: &str,
    ) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let username = Username::parse(username).map_err(|_| ControlError::NotFound("member"))?;
        let user = tx
            .user_by_name(username.as_str())
            .await?
            .ok_or(ControlError::NotFound("member"))?;
        let before = tx
            .delete_membership(&app.id, &user.id)
            .await?
            .ok_or(ControlError::NotFound("member"))?;
        tx.record_audit(AuditEntry {
            actor: &actor.name,
            app_slug: Some(&app.slug),
            entity_type: "member",
            entity_id: &user.username,
            action: "delete",
            before: Some(json!({"username": user.username, "role": before.as_str()})),
            after: None,
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
