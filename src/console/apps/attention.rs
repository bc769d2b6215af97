//! Across the applications a user may see: the policies denying, refusing or that would
//! deny over the last minutes, worst first. Only the applications whose own counts show
//! some are read further (their policies, then their live state in one Redis call), so
//! the list costs nothing while all is quiet.

use crate::auth::Actor;
use crate::console::recent::Recent;
use crate::control::{AppView, Control, ControlError, PolicyView};

use super::policy_table::{PolicyRow, rows_with_live};

/// The most applications read further, and policies listed.
const APPS_READ: usize = 20;
pub const LISTED: usize = 20;

/// One policy needing attention.
pub struct AttentionRow {
    pub app: String,
    pub row: PolicyRow,
}

/// The policies needing attention across `apps` (whose counts, same order, are
/// `activity`): worst first, at most [`LISTED`], with how many there were in all.
pub async fn needing_attention(
    control: &Control,
    actor: &Actor,
    apps: &[AppView],
    activity: &[Recent],
) -> Result<(Vec<AttentionRow>, usize), ControlError> {
    let troubled: Vec<&AppView> = apps
        .iter()
        .zip(activity)
        .filter(|(_, r)| r.is_denying() || r.is_refusing() || r.would_deny())
        .map(|(app, _)| app)
        .take(APPS_READ)
        .collect();
    let mut policies: Vec<PolicyView> = Vec::new();
    for app in troubled {
        policies.extend(control.list_policies(actor, Some(&app.slug)).await?);
    }
    let live = control.live_state_of(&policies).await;
    let mut rows: Vec<AttentionRow> = policies
        .iter()
        .zip(rows_with_live(&policies, &live))
        .map(|(p, row)| AttentionRow {
            app: p.owner_app.clone(),
            row,
        })
        .filter(|r| {
            let recent = &r.row.recent;
            recent.is_denying() || recent.is_refusing() || recent.would_deny()
        })
        .collect();
    rows.sort_by(|a, b| {
        b.row
            .recent
            .attention()
            .cmp(&a.row.recent.attention())
            .then_with(|| a.row.name.cmp(&b.row.name))
    });
    let all = rows.len();
    rows.truncate(LISTED);
    Ok((rows, all))
}
