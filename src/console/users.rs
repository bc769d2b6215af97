//! Users, for admins: create one, set the global role, disable, reset a password.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use super::error::ConsoleError;
use super::format::ago;
use super::forms::FormErrors;
use super::page::{Chrome, Notice};
use super::session::SignedIn;
use super::{render, render_status, see_other};
use crate::control::{ControlError, UserFlags};
use crate::state::AppState;
use crate::store::now_ms;

pub struct UserRow {
    pub username: String,
    pub is_admin: bool,
    pub disabled: bool,
    pub created: String,
    pub is_you: bool,
}

#[derive(Template)]
#[template(path = "users/list.html")]
struct UsersPage {
    chrome: Chrome,
    users: Vec<UserRow>,
    form: NewUserForm,
    errors: FormErrors,
    /// Which user's row an error (of a role change or reset) belongs to.
    row_error: Option<(String, String)>,
}

#[derive(Debug, Default, Deserialize)]
pub struct NewUserForm {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
    pub admin: Option<String>,
    #[serde(default)]
    pub csrf: String,
}

async fn page(
    state: &AppState,
    signed_in: &SignedIn,
    form: NewUserForm,
    errors: FormErrors,
    row_error: Option<(String, String)>,
) -> Result<UsersPage, ConsoleError> {
    let now = now_ms();
    let users = state
        .control
        .list_users(&signed_in.actor)
        .await?
        .iter()
        .map(|u| UserRow {
            is_you: signed_in.actor.user_id.as_deref() == Some(u.id.as_str()),
            username: u.username.clone(),
            is_admin: u.is_admin(),
            disabled: u.is_disabled(),
            created: ago(u.created_ms, now),
        })
        .collect();
    Ok(UsersPage {
        chrome: signed_in.chrome("users"),
        users,
        // A password typed into a form that failed is never sent back to the browser.
        form: NewUserForm {
            password: String::new(),
            ..form
        },
        errors,
        row_error,
    })
}

pub async fn list(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    notice: web::Query<Notice>,
) -> Result<HttpResponse, ConsoleError> {
    let mut page = page(
        &state,
        &signed_in,
        NewUserForm::default(),
        FormErrors::default(),
        None,
    )
    .await?;
    page.chrome = page.chrome.with_notice(&notice);
    render(&page)
}

pub async fn create(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<NewUserForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let password = SecretString::from(form.password.clone());
    let result = state
        .control
        .create_user(
            &signed_in.actor,
            form.username.trim(),
            password,
            form.admin.is_some(),
        )
        .await;
    let errors = match result {
        Ok(_) => return Ok(see_other("/users?done=user-created")),
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&errors),
        Err(ControlError::Conflict(message)) => FormErrors::general(message),
        Err(e) => return Err(e.into()),
    };
    let page = page(&state, &signed_in, form, errors, None).await?;
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}

#[derive(Debug, Deserialize)]
pub struct FlagsForm {
    /// `admin` or `member`.
    #[serde(default)]
    role: String,
    disabled: Option<String>,
    #[serde(default)]
    csrf: String,
}

/// `POST /users/{username}`: global role and disabled flag.
pub async fn update(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    username: web::Path<String>,
    form: web::Form<FlagsForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let is_admin = match form.role.as_str() {
        "admin" => true,
        "member" => false,
        _ => {
            return Err(ConsoleError::BadRequest(
                "role must be admin or member".into(),
            ));
        }
    };
    let flags = UserFlags {
        is_admin,
        disabled: form.disabled.is_some(),
    };
    match state
        .control
        .set_user_flags(&signed_in.actor, &username, flags)
        .await
    {
        Ok(()) => Ok(see_other("/users?done=user-updated")),
        Err(ControlError::Conflict(message)) => {
            let row_error = Some((username.into_inner(), message));
            let page = page(
                &state,
                &signed_in,
                NewUserForm::default(),
                FormErrors::default(),
                row_error,
            )
            .await?;
            render_status(&page, StatusCode::CONFLICT)
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Deserialize)]
pub struct ResetForm {
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
}

/// `POST /users/{username}/password`: an admin sets a new password.
pub async fn reset_password(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    username: web::Path<String>,
    form: web::Form<ResetForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let password = SecretString::from(form.password);
    match state
        .control
        .reset_password(&signed_in.actor, &username, password)
        .await
    {
        Ok(()) => Ok(see_other("/users?done=password-reset")),
        Err(ControlError::Invalid(errors)) => {
            let message = errors
                .0
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join("; ");
            let row_error = Some((username.into_inner(), format!("New password {message}")));
            let page = page(
                &state,
                &signed_in,
                NewUserForm::default(),
                FormErrors::default(),
                row_error,
            )
            .await?;
            render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
        }
        Err(e) => Err(e.into()),
    }
}
