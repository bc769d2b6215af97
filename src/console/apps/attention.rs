//! Across the applications a user may see: the policies denying, refusing or that would
//! deny over the last minutes, worst first. Only the applications whose own counts show
//! some are read further (their policies' names, then their live state in one Redis
//! call, then the rows of those listed), so the list costs nothing while all is quiet.

use crate::auth::Actor;
use crate::console::recent::Recent;
use crate::control::{AppView, Control, ControlError, LivePolicy, PolicyScope, PolicyView};

use super::policy_table::{PolicyRow, Standing};

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
    // Their policies' names and scopes, then the live state of all of them (one Redis
    // call), then the stored rows of those listed only.
    let mut scopes: Vec<(&str, PolicyScope)> = Vec::new();
    for app in troubled {
        let of_app = control.policy_scopes(actor, &app.slug).await?;
        scopes.extend(of_app.into_iter().map(|p| (app.slug.as_str(), p)));
    }
    let live = control
        .live_state_named(scopes.iter().map(|(_, p)| (p.name.as_str(), p.state_read)))
        .await;
    let mut needing: Vec<(&str, Standing, LivePolicy)> = scopes
        .iter()
        .zip(live)
        .map(|((app, p), live)| (*app, Standing::of(p.scope, Some(&live)), live))
        .filter(|(_, s, _)| {
            let recent = &s.recent;
            recent.is_denying() || recent.is_refusing() || recent.would_deny()
        })
        .collect();
    needing.sort_by(|(_, a, a_live), (_, b, b_live)| {
        b.recent
            .attention()
            .cmp(&a.recent.attention())
            .then_with(|| a_live.name.cmp(&b_live.name))
    });
    let all = needing.len();
    needing.truncate(LISTED);
    // The listed rows, read once per application.
    let mut apps_listed: Vec<&str> = needing.iter().map(|(app, _, _)| *app).collect();
    apps_listed.sort_unstable();
    apps_listed.dedup();
    let mut views: Vec<PolicyView> = Vec::new();
    for app in apps_listed {
        let names: Vec<&str> = needing
            .iter()
            .filter(|(a, _, _)| *a == app)
            .map(|(_, _, live)| live.name.as_str())
            .collect();
        views.extend(control.policies_named(actor, app, &names).await?);
    }
    // Policy names are unique across applications; one deleted since its name was read is
    // left out.
    let rows = needing
        .iter()
        .filter_map(|(app, _, live)| {
            let view = views.iter().find(|v| v.name == live.name)?;
            Some(AttentionRow {
                app: (*app).to_owned(),
                row: PolicyRow::new(view, Some(live)),
            })
        })
        .collect();
    Ok((rows, all))
}
