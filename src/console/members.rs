//! An application's members (owners add, change and remove them) and its API keys
//! (owners create them, shown once, and revoke them).

use actix_web::http::StatusCode;
use actix_web::http::header::{CacheControl, CacheDirective};
use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::apps::AppPage;
use super::error::ConsoleError;
use super::forms::FormErrors;
use super::login::CsrfForm;
use super::session::SignedIn;
use super::{render_status, see_other};
use crate::control::{ControlError, KeyInput, MemberInput};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub struct MemberForm {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub csrf: String,
}

/// Re-renders the application page with a form's errors, keeping what was typed.
async fn app_page_with(
    state: &AppState,
    signed_in: &SignedIn,
    slug: &str,
    fill: impl FnOnce(&mut AppPage),
) -> Result<HttpResponse, ConsoleError> {
    let mut page = AppPage::load(state, signed_in, slug).await?;
    fill(&mut page);
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}

/// `POST /apps/{slug}/members`: adds a member or changes a member's role.
pub async fn save(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: web::Form<MemberForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let username = form.username.trim().to_owned();
    let input = MemberInput {
        role: Some(form.role.clone()),
    };
    let errors = match state
        .control
        .set_member(&signed_in.actor, &slug, &username, input)
        .await
    {
        Ok(_) => {
            return Ok(see_other(&format!(
                "/apps/{slug}?done=member-saved#members"
            )));
        }
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&errors),
        Err(ControlError::NotFound("user")) => {
            FormErrors::general(format!("There is no user named {username:?}."))
        }
        Err(e) => return Err(e.into()),
    };
    app_page_with(&state, &signed_in, &slug, |page| {
        page.member_form = form;
        page.member_errors = errors;
    })
    .await
}

/// `POST /apps/{slug}/members/{username}/remove`
pub async fn remove(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, username) = path.into_inner();
    state
        .control
        .remove_member(&signed_in.actor, &slug, &username)
        .await?;
    Ok(see_other(&format!(
        "/apps/{slug}?done=member-removed#members"
    )))
}

#[derive(Debug, Default, Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub csrf: String,
}

/// `POST /apps/{slug}/keys`: the answer is the page with the new key, shown this once.
pub async fn create_key(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: web::Form<KeyForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let input = KeyInput {
        label: Some(form.label.clone()),
    };
    match state
        .control
        .create_key(&signed_in.actor, &slug, input)
        .await
    {
        Ok(created) => {
            let mut page = AppPage::load(&state, &signed_in, &slug).await?;
            page.new_key = Some(created);
            let mut response = render_status(&page, StatusCode::CREATED)?;
            // The key is in this page and nowhere else: no cache may keep it.
            response.headers_mut().insert(
                actix_web::http::header::CACHE_CONTROL,
                CacheControl(vec![CacheDirective::NoStore])
                    .to_string()
                    .parse()
                    .map_err(anyhow::Error::from)?,
            );
            Ok(response)
        }
        Err(ControlError::Invalid(errors)) => {
            app_page_with(&state, &signed_in, &slug, |page| {
                page.key_label = form.label;
                page.key_errors = FormErrors::from_fields(&errors);
            })
            .await
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /apps/{slug}/keys/{id}/revoke`
pub async fn revoke_key(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, id) = path.into_inner();
    state
        .control
        .revoke_key(&signed_in.actor, &slug, &id)
        .await?;
    Ok(see_other(&format!("/apps/{slug}?done=key-revoked#keys")))
}
