//! The signed-in user's own account: who they are, their applications, their password.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::error::ConsoleError;
use super::forms::FormErrors;
use super::page::{Chrome, Notice};
use super::session::SignedIn;
use super::{render, render_status, see_other};
use crate::control::{AppView, ControlError};
use crate::domain::FieldErrors;
use crate::state::AppState;

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    chrome: Chrome,
    username: String,
    is_admin: bool,
    apps: Vec<AppView>,
    errors: FormErrors,
}

#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    current_password: SecretString,
    #[serde(default)]
    new_password: SecretString,
    #[serde(default)]
    confirm_password: SecretString,
    #[serde(default)]
    csrf: SecretString,
}

async fn page(
    state: &AppState,
    signed_in: &SignedIn,
    errors: FormErrors,
) -> Result<AccountPage, ConsoleError> {
    Ok(AccountPage {
        chrome: signed_in.chrome("account"),
        username: signed_in.actor.name.clone(),
        is_admin: signed_in.actor.is_admin,
        apps: state.control.list_apps(&signed_in.actor).await?,
        errors,
    })
}

pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    notice: web::Query<Notice>,
) -> Result<HttpResponse, ConsoleError> {
    let mut page = page(&state, &signed_in, FormErrors::default()).await?;
    page.chrome = page.chrome.with_notice(&notice);
    render(&page)
}

pub async fn change_password(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<PasswordForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let errors = if form.new_password.expose_secret() != form.confirm_password.expose_secret() {
        let mut errors = FieldErrors::default();
        errors.push("confirm_password", "does not match the new password");
        FormErrors::from_fields(&errors)
    } else {
        let result = state
            .control
            .change_own_password(
                &signed_in.actor,
                form.current_password,
                form.new_password,
                Some(&signed_in.token),
            )
            .await;
        match result {
            Ok(()) => return Ok(see_other("/account?done=password-changed")),
            Err(ControlError::Invalid(errors)) => {
                // The control layer names the new password "password".
                let renamed = FieldErrors(
                    errors
                        .0
                        .into_iter()
                        .map(|mut e| {
                            if e.field == "password" {
                                e.field = "new_password".to_owned();
                            }
                            e
                        })
                        .collect(),
                );
                FormErrors::from_fields(&renamed)
            }
            Err(e) => return Err(e.into()),
        }
    };
    render_status(
        &page(&state, &signed_in, errors).await?,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
}
