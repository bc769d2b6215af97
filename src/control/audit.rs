use crate::auth::Actor;
use crate::store::{AUDIT_EXPORT_MAX, AuditChoices, AuditFilter, Tx};

use super::{AuditView, Control, ControlError, ControlResult};

pub const AUDIT_PAGE_SIZE: u32 = 50;

/// A page of the audit log as the console shows it: its events, whether older ones
/// follow, and what its filters can choose from.
#[derive(Debug, Clone)]
pub struct AuditPage {
    pub events: Vec<AuditView>,
    pub has_next: bool,
    pub choices: AuditChoices,
}

/// The applications whose events the actor may see: `None` for all (admins).
async fn visible_apps(tx: &mut Tx, actor: &Actor) -> ControlResult<Option<Vec<String>>> {
    if actor.is_admin {
        return Ok(None);
    }
    Ok(Some(match &actor.user_id {
        Some(user_id) => tx
            .list_apps_of_user(user_id)
            .await?
            .into_iter()
            .map(|a| a.slug)
            .collect(),
        None => Vec::new(),
    }))
}

impl Control {
    /// Audit events, newest first: all for admins; for members, those of their apps.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn list_audit(
        &self,
        actor: &Actor,
        mut filter: AuditFilter,
    ) -> ControlResult<Vec<AuditView>> {
        let mut tx = self.store.begin_read().await?;
        filter.visible_apps = visible_apps(&mut tx, actor).await?;
        if filter.per_page == 0 {
            filter.per_page = AUDIT_PAGE_SIZE;
        }
        let events = tx.list_audit(&filter).await?;
        tx.commit().await?;
        Ok(events.into_iter().map(AuditView::from).collect())
    }

    /// One page of [`Control::list_audit`] with what the console needs around it, in a
    /// fixed number of statements whatever the page holds.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn audit_page(
        &self,
        actor: &Actor,
        mut filter: AuditFilter,
    ) -> ControlResult<AuditPage> {
        let mut tx = self.store.begin_read().await?;
        filter.visible_apps = visible_apps(&mut tx, actor).await?;
        let per_page = filter.per_page.max(1) as usize;
        // One event more than the page: whether an older page exists, in the same query.
        filter.peek_next = true;
        let mut events = tx.list_audit(&filter).await?;
        let choices = tx.audit_choices(filter.visible_apps.as_deref()).await?;
        tx.commit().await?;
        let has_next = events.len() > per_page;
        events.truncate(per_page);
        Ok(AuditPage {
            events: events.into_iter().map(AuditView::from).collect(),
            has_next,
            choices,
        })
    }

    /// Every event matching `filter` (its page ignored), newest first, for an export; more
    /// than [`AUDIT_EXPORT_MAX`] is refused rather than cut short.
    #[tracing::instrument(level = "debug", skip_all, fields(actor = %actor.name))]
    pub async fn export_audit(
        &self,
        actor: &Actor,
        filter: AuditFilter,
    ) -> ControlResult<Vec<AuditView>> {
        let events = self
            .list_audit(
                actor,
                AuditFilter {
                    page: 1,
                    per_page: AUDIT_EXPORT_MAX,
                    peek_next: true,
                    ..filter
                },
            )
            .await?;
        if events.len() > AUDIT_EXPORT_MAX as usize {
            return Err(ControlError::Invalid(
                crate::domain::FieldError::new(
                    "from",
                    format!(
                        "more than {AUDIT_EXPORT_MAX} events match: choose a shorter date range"
                    ),
                )
                .into(),
            ));
        }
        Ok(events)
    }
}
