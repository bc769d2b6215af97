use crate::auth::Actor;
use crate::store::AuditFilter;

use super::{AuditView, Control, ControlResult};

pub const AUDIT_PAGE_SIZE: u32 = 50;

impl Control {
    /// Audit events, newest first: all for admins; for members, those of their apps.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn list_audit(
        &self,
        actor: &Actor,
        mut filter: AuditFilter,
    ) -> ControlResult<Vec<AuditView>> {
        let mut tx = self.store.begin_read().await?;
        if !actor.is_admin {
            let visible = match &actor.user_id {
                Some(user_id) => tx
                    .list_apps_of_user(user_id)
                    .await?
                    .into_iter()
                    .map(|a| a.slug)
                    .collect(),
                None => Vec::new(),
            };
            filter.visible_apps = Some(visible);
        }
        if filter.per_page == 0 {
            filter.per_page = AUDIT_PAGE_SIZE;
        }
        let events = tx.list_audit(&filter).await?;
        tx.commit().await?;
        Ok(events.into_iter().map(AuditView::from).collect())
    }
}
