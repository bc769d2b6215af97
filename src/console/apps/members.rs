//! An application's members: owners add them, change their role and remove them. A
//! change that would leave the application without an owner is refused for members
//! ("make someone else owner first"); an admin is asked to confirm it, on a page of its
//! own (a plain form: no script needed).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use super::page::{self, MemberDraft};
use crate::console::error::ConsoleError;
use crate::console::forms::FormErrors;
use crate::console::page::Chrome;
use crate::console::respond::{render_status, see_other};
use crate::console::session::SignedIn;
use crate::control::{ControlError, MemberInput, Ownerless};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub struct MemberForm {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub role: String,
    /// `yes` once an admin confirmed leaving the application without an owner.
    #[serde(default)]
    pub confirm_ownerless: String,
    #[serde(default)]
    pub csrf: SecretString,
}

#[derive(Debug, Default, Deserialize)]
pub struct RemoveForm {
    #[serde(default)]
    pub confirm_ownerless: String,
    #[serde(default)]
    pub csrf: SecretString,
}

fn ownerless(confirm: &str) -> Ownerless {
    if confirm == "yes" {
        Ownerless::AdminConfirmed
    } else {
        Ownerless::Refuse
    }
}

/// The admin's question before an application loses its last owner.
#[derive(Template)]
#[template(path = "apps/confirm_ownerless.html")]
struct ConfirmOwnerless {
    chrome: Chrome,
    slug: String,
    username: String,
    /// The role it would be given; empty for a removal.
    role: String,
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
    let result = state
        .control
        .set_member(
            &signed_in.actor,
            &slug,
            &username,
            input,
            ownerless(&form.confirm_ownerless),
        )
        .await;
    let (errors, status) = match result {
        Ok(_) => {
            return Ok(see_other(&format!(
                "/apps/{slug}?done=member-saved#members"
            )));
        }
        Err(ControlError::Invalid(errors)) => (
            FormErrors::from_fields(&errors),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(ControlError::NotFound("user")) => (
            FormErrors::general(format!("There is no user named {username:?}.")),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        Err(ControlError::LastOwner { admin: true, .. }) => {
            return ask_admin(&signed_in, &slug, username, form.role);
        }
        Err(e @ ControlError::LastOwner { .. }) => (
            FormErrors::general(last_owner_text(&e)),
            StatusCode::CONFLICT,
        ),
        Err(e) => return Err(e.into()),
    };
    let mut response = page::with_errors(&state, &signed_in, &slug, |page| {
        page.member_form = MemberDraft {
            username: form.username,
            role: form.role,
        };
        page.member_errors = errors;
    })
    .await?;
    *response.status_mut() = status;
    Ok(response)
}

/// `POST /apps/{slug}/members/{username}/remove`
pub async fn remove(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String)>,
    form: web::Form<RemoveForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, username) = path.into_inner();
    let result = state
        .control
        .remove_member(
            &signed_in.actor,
            &slug,
            &username,
            ownerless(&form.confirm_ownerless),
        )
        .await;
    match result {
        Ok(()) => Ok(see_other(&format!(
            "/apps/{slug}?done=member-removed#members"
        ))),
        Err(ControlError::LastOwner { admin: true, .. }) => {
            ask_admin(&signed_in, &slug, username, String::new())
        }
        Err(e @ ControlError::LastOwner { .. }) => {
            let mut response = page::with_errors(&state, &signed_in, &slug, |page| {
                page.member_errors = FormErrors::general(last_owner_text(&e));
            })
            .await?;
            *response.status_mut() = StatusCode::CONFLICT;
            Ok(response)
        }
        Err(e) => Err(e.into()),
    }
}

/// The refusal as a sentence.
fn last_owner_text(e: &ControlError) -> String {
    let text = e.to_string();
    format!("T{}.", text.strip_prefix('t').unwrap_or(&text))
}

/// 409 with the question: the same change again, confirmed, or back to the page.
fn ask_admin(
    signed_in: &SignedIn,
    slug: &str,
    username: String,
    role: String,
) -> Result<HttpResponse, ConsoleError> {
    let page = ConfirmOwnerless {
        chrome: signed_in.chrome("apps"),
        slug: slug.to_owned(),
        username,
        role,
    };
    render_status(&page, StatusCode::CONFLICT)
}
