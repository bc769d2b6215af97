//! What the policy pages may change: the policy and its application, if the actor may
//! edit them (a viewer gets 403 even for a form).

use crate::console::error::ConsoleError;
use crate::console::session::SignedIn;
use crate::control::{AppDetail, PolicyView};
use crate::state::AppState;

/// The application, if the actor may edit it; a viewer gets 403 even for the form.
pub(super) async fn editable_app(
    state: &AppState,
    signed_in: &SignedIn,
    slug: &str,
) -> Result<AppDetail, ConsoleError> {
    let app = state.control.get_app(&signed_in.actor, slug).await?;
    if app.may_edit {
        Ok(app)
    } else {
        Err(ConsoleError::Forbidden)
    }
}

/// The policy and its application, if the actor may edit them.
pub(super) async fn editable_policy(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
) -> Result<(PolicyView, AppDetail), ConsoleError> {
    let policy = state.control.get_policy(&signed_in.actor, name).await?;
    let app = editable_app(state, signed_in, &policy.owner_app).await?;
    Ok((policy, app))
}
