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
use super::respond::{render, render_status, see_other};
use super::session::SignedIn;
use crate::control::{ControlError, UserFlags};
use crate::state::AppState;
use crate::store::now_ms;

pub struct UserRow {
    pub username: String,
    pub is_admin: bool,
    pub disabled: bool,
    pub created: super::format::Moment,
    pub is_you: bool,
}

#[derive(Template)]
#[template(path = "users/list.html")]
struct UsersPage {
    chrome: Chrome,
    users: Vec<UserRow>,
    form: NewUserDraft,
    errors: FormErrors,
    /// Which user's row an error (of a role change or reset) belongs to.
    row_error: Option<(String, String)>,
}

#[derive(Debug, Deserialize)]
pub struct NewUserForm {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: SecretString,
    pub admin: Option<String>,
    #[serde(default)]
    pub csrf: SecretString,
}

/// What the new-user form shows again after an error: never the password typed.
#[derive(Debug, Default)]
pub struct NewUserDraft {
    pub username: String,
    pub admin: bool,
}

async fn page(
    state: &AppState,
    signed_in: &SignedIn,
    form: NewUserDraft,
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
        form,
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
        NewUserDraft::default(),
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
    let draft = NewUserDraft {
        username: form.username.trim().to_owned(),
        admin: form.admin.is_some(),
    };
    let result = state
        .control
        .create_user(
            &signed_in.actor,
            &draft.username,
            form.password,
            draft.admin,
        )
        .await;
    let errors = match result {
        Ok(_) => return Ok(see_other("/users?done=user-created")),
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&errors),
        Err(ControlError::Conflict(message)) => FormErrors::general(message),
        Err(e) => return Err(e.into()),
    };
    let page = page(&state, &signed_in, draft, errors, None).await?;
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}

#[derive(Debug, Deserialize)]
pub struct FlagsForm {
    /// `admin` or `member`.
    #[serde(default)]
    role: String,
    disabled: Option<String>,
    #[serde(default)]
    csrf: SecretString,
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
                NewUserDraft::default(),
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
    password: SecretString,
    #[serde(default)]
    csrf: SecretString,
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
    match state
        .control
        .reset_password(&signed_in.actor, &username, form.password)
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
                NewUserDraft::default(),
                FormErrors::default(),
                row_error,
            )
            .await?;
            render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_never_show_their_secrets_in_a_log() {
        let new_user = NewUserForm {
            username: "ann".into(),
            password: "hunter2-password".into(),
            admin: None,
            csrf: "csrf-token-value".into(),
        };
        let reset = ResetForm {
            password: "hunter2-password".into(),
            csrf: "csrf-token-value".into(),
        };
        for logged in [format!("{new_user:?}"), format!("{reset:?}")] {
            assert!(!logged.contains("hunter2"), "{logged}");
            assert!(!logged.contains("csrf-token-value"), "{logged}");
        }
        assert!(format!("{new_user:?}").contains("ann"));
    }
}
