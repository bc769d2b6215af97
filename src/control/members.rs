use serde_json::json;

use crate::auth::{Actor, Permission};
use crate::domain::{FieldError, MemberRole, Username};
use crate::store::{AppRecord, AuditEntry, Tx};

use super::inputs::MemberInput;
use super::{Control, ControlError, ControlResult, MemberView, authorised_app};

/// Whether a change may leave an application without an owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownerless {
    /// No: refused with [`ControlError::LastOwner`] (the console asks an admin to
    /// confirm, then sends `AdminConfirmed`).
    Refuse,
    /// Yes, when the actor is an admin (who can still manage the application); members
    /// are refused all the same.
    AdminConfirmed,
}

/// Refuses a change that takes away the application's last owner: nobody but an admin
/// could manage it any more. Members may never; admins when they confirmed it.
async fn check_an_owner_stays(
    tx: &mut Tx,
    actor: &Actor,
    app: &AppRecord,
    ownerless: Ownerless,
) -> ControlResult<()> {
    tx.lock_app(&app.id).await?;
    if tx.count_owners(&app.id).await? > 1 {
        return Ok(());
    }
    if actor.is_admin && ownerless == Ownerless::AdminConfirmed {
        return Ok(());
    }
    Err(ControlError::LastOwner {
        app: app.slug.clone(),
        admin: actor.is_admin,
    })
}

impl Control {
    #[tracing::instrument(skip_all, fields(actor = %actor.name, slug = %slug, username = %username))]
    pub async fn set_member(
        &self,
        actor: &Actor,
        slug: &str,
        username: &str,
        input: MemberInput,
        ownerless: Ownerless,
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
        let current = tx.role_in_app(&app.id, &user.id).await?;
        if current == Some(MemberRole::Owner) && role != MemberRole::Owner {
            check_an_owner_stays(&mut tx, actor, &app, ownerless).await?;
        }
        let before = tx.set_membership(&app.id, &user.id, role).await?;
        let view = MemberView {
            username: user.username.clone(),
            role: role.as_str().to_owned(),
        };
        tx.record_audit(AuditEntry {
            actor: actor.author(),
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
        ownerless: Ownerless,
    ) -> ControlResult<()> {
        let mut tx = self.store.begin().await?;
        let app = authorised_app(&mut tx, actor, slug, Permission::Edit).await?;
        let username = Username::parse(username).map_err(|_| ControlError::NotFound("member"))?;
        let user = tx
            .user_by_name(username.as_str())
            .await?
            .ok_or(ControlError::NotFound("member"))?;
        if tx.role_in_app(&app.id, &user.id).await? == Some(MemberRole::Owner) {
            check_an_owner_stays(&mut tx, actor, &app, ownerless).await?;
        }
        let before = tx
            .delete_membership(&app.id, &user.id)
            .await?
            .ok_or(ControlError::NotFound("member"))?;
        tx.record_audit(AuditEntry {
            actor: actor.author(),
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
