//! Deleting a policy: a confirmation page saying what it allows and how much traffic it
//! served in the last hour, offering shadow mode or disabling instead; then the POST.

use actix_web::{HttpResponse, web};
use askama::Template;

use crate::console::error::ConsoleError;
use crate::console::format::readable_limit;
use crate::console::last_hour::LastHour;
use crate::console::page::Chrome;
use crate::console::respond::{render, see_other};
use crate::console::session::CsrfForm;
use crate::console::session::SignedIn;
use crate::control::PolicyView;
use crate::state::AppState;

use super::editable::editable_policy;

#[derive(Template)]
#[template(path = "policies/delete.html")]
struct DeletePage {
    chrome: Chrome,
    policy: PolicyView,
    rate: String,
    /// What it decided in the last hour; `None` when Redis cannot be reached.
    last_hour: Option<LastHour>,
}

pub async fn confirm_delete(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let (policy, _) = editable_policy(&state, &signed_in, &name).await?;
    let last_hour = state
        .control
        .last_hour_of(&[policy.name.as_str()])
        .await
        .map(|hours| LastHour::of(hours.first().map_or(&[], Vec::as_slice)));
    render(&DeletePage {
        chrome: signed_in.chrome("apps"),
        rate: readable_limit(&policy),
        policy,
        last_hour,
    })
}

pub async fn delete(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let policy = state.control.get_policy(&signed_in.actor, &name).await?;
    state.control.delete_policy(&signed_in.actor, &name).await?;
    Ok(see_other(&format!(
        "/apps/{}?done=policy-deleted",
        policy.owner_app
    )))
}
