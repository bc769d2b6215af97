//! An application's settings: renamed (slug, name, description) and deleted, by its
//! owners and admins. Deleting asks first, on a page of its own (no script needed), and
//! is refused while the application owns policies.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use super::page;
use super::page_parts::SettingsDraft;
use crate::console::error::ConsoleError;
use crate::console::forms::FormErrors;
use crate::console::page::Chrome;
use crate::console::respond::{render, render_status, see_other};
use crate::console::session::CsrfForm;
use crate::console::session::SignedIn;
use crate::control::{AppInput, AppView, ControlError};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct SettingsForm {
    #[serde(flatten)]
    draft: SettingsDraft,
    #[serde(default)]
    csrf: SecretString,
}

/// `POST /apps/{slug}/settings`: 303 to the application's page (at its new address).
pub async fn save(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: web::Form<SettingsForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let draft = form.into_inner().draft;
    let input = AppInput {
        slug: Some(draft.slug.trim().to_owned()),
        name: Some(draft.name.clone()),
        description: Some(draft.description.clone()),
    };
    let errors = match state
        .control
        .update_app(&signed_in.actor, &slug, input)
        .await
    {
        Ok(app) => return Ok(see_other(&format!("/apps/{}?done=app-updated", app.slug))),
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&errors),
        Err(ControlError::Conflict(message)) => FormErrors::general(message),
        Err(e) => return Err(e.into()),
    };
    page::with_errors(&state, &signed_in, &slug, |page| {
        page.settings = draft;
        page.settings_errors = errors;
    })
    .await
}

#[derive(Template)]
#[template(path = "apps/delete.html")]
struct DeletePage {
    chrome: Chrome,
    app: AppView,
    keys: usize,
    members: usize,
    /// Why it cannot be deleted now, if it cannot.
    refusal: Option<String>,
    may_edit: bool,
}

/// `GET /apps/{slug}/delete`: what deleting takes with it, and the button.
pub async fn confirm(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let page = delete_page(&state, &signed_in, &slug, None).await?;
    if !page.may_edit {
        return Err(ConsoleError::Forbidden);
    }
    render(&page)
}

/// `POST /apps/{slug}/delete`: 303 to the list; refused (409, on the same page) while
/// the application owns policies.
pub async fn delete(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    match state.control.delete_app(&signed_in.actor, &slug).await {
        Ok(()) => Ok(see_other("/apps?done=app-deleted")),
        Err(e @ (ControlError::OwnsPolicies { .. } | ControlError::Conflict(_))) => {
            let page = delete_page(&state, &signed_in, &slug, Some(e.to_string())).await?;
            render_status(&page, StatusCode::CONFLICT)
        }
        Err(e) => Err(e.into()),
    }
}

async fn delete_page(
    state: &AppState,
    signed_in: &SignedIn,
    slug: &str,
    refusal: Option<String>,
) -> Result<DeletePage, ConsoleError> {
    let detail = state.control.get_app(&signed_in.actor, slug).await?;
    Ok(DeletePage {
        chrome: signed_in.chrome("apps"),
        keys: detail
            .keys
            .iter()
            .filter(|k| k.revoked_at.is_none())
            .count(),
        members: detail.members.len(),
        may_edit: detail.may_edit,
        app: detail.app,
        refusal,
    })
}
