//! An application's members: owners add them, change their role and remove them.

use actix_web::{HttpResponse, web};
use secrecy::SecretString;
use serde::Deserialize;

use super::page::{self, MemberDraft};
use crate::console::error::ConsoleError;
use crate::console::forms::FormErrors;
use crate::console::login::CsrfForm;
use crate::console::see_other;
use crate::console::session::SignedIn;
use crate::control::{ControlError, MemberInput};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub struct MemberForm {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub csrf: SecretString,
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
    page::with_errors(&state, &signed_in, &slug, |page| {
        page.member_form = MemberDraft {
            username: form.username,
            role: form.role,
        };
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
