//! The signed-in user's own account: who they are, their applications, their password,
//! and their personal access tokens for the admin API (made here or by the CLI; a new
//! token's text reaches this page once, through a one-time flash: post-redirect-get).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use super::error::ConsoleError;
use super::format::{ago, short_time};
use super::forms::{FormErrors, utc_date_time};
use super::page::{Chrome, Notice};
use super::respond::{render, render_status, see_other};
use super::session::SignedIn;
use crate::control::{AppView, ControlError, Reveal, Revealed, TokenInput, rfc3339};
use crate::state::AppState;
use crate::store::now_ms;

#[derive(Template)]
#[template(path = "account.html")]
struct AccountPage {
    chrome: Chrome,
    username: String,
    is_admin: bool,
    apps: Vec<AppView>,
    errors: FormErrors,
    tokens: Vec<TokenRow>,
    /// Tokens just made by this session, shown this once: (label, text).
    new_tokens: Vec<(String, String)>,
    token_label: String,
    token_expires_at: String,
    token_read_only: bool,
    token_errors: FormErrors,
}

struct TokenRow {
    id: String,
    label: String,
    created: String,
    last_used: String,
    read_only: bool,
    /// "never", the date-time, or when it expired.
    expiry: String,
    expired: bool,
}

#[derive(Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    label: String,
    /// A `datetime-local` value, read as UTC; empty: never expires.
    #[serde(default)]
    expires_at: String,
    /// The checkbox: present ("on") when ticked.
    #[serde(default)]
    read_only: Option<String>,
    #[serde(default)]
    csrf: SecretString,
}

/// Where a new token is shown.
const ACCOUNT_PAGE: &str = "/account";

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
    let now = now_ms();
    let tokens = state
        .control
        .list_own_tokens(&signed_in.actor)
        .await?
        .into_iter()
        .map(|t| {
            let expired = t.expires_ms.is_some_and(|at| at <= now);
            TokenRow {
                read_only: t.is_read_only(),
                expiry: match t.expires_ms {
                    None => "never".to_owned(),
                    Some(at) if expired => format!("expired {}", short_time(&rfc3339(at))),
                    Some(at) => short_time(&rfc3339(at)),
                },
                expired,
                id: t.id,
                label: t.label,
                created: short_time(&rfc3339(t.created_ms)),
                last_used: t
                    .last_used_ms
                    .map_or("never".to_owned(), |at| ago(at, now).to_string()),
            }
        })
        .collect();
    Ok(AccountPage {
        chrome: signed_in.chrome("account"),
        username: signed_in.actor.name.clone(),
        is_admin: signed_in.actor.is_admin,
        apps: state.control.list_apps(&signed_in.actor).await?,
        errors,
        tokens,
        new_tokens: Vec::new(),
        token_label: String::new(),
        token_expires_at: String::new(),
        token_read_only: false,
        token_errors: FormErrors::default(),
    })
}

pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    notice: web::Query<Notice>,
) -> Result<HttpResponse, ConsoleError> {
    let mut page = page(&state, &signed_in, FormErrors::default()).await?;
    page.chrome = page.chrome.with_notice(&notice);
    page.new_tokens = state
        .control
        .take_revealed(&signed_in.token, ACCOUNT_PAGE)
        .await?
        .into_iter()
        .filter_map(|r| match r {
            Revealed::AccessToken { label, token, .. } => Some((label, token)),
            Revealed::ApiKey { .. } | Revealed::WebhookSecret { .. } => None,
        })
        .collect();
    let mut response = render(&page)?;
    if !page.new_tokens.is_empty() {
        super::respond::no_store(&mut response);
    }
    Ok(response)
}

/// `POST /account/tokens`: 303 to the account page, which shows the token once.
pub async fn create_token(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<TokenForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let input = TokenInput {
        label: Some(form.label.clone()),
        expires_at: utc_date_time(&form.expires_at),
        read_only: form.read_only.is_some(),
    };
    let reveal = Reveal::OnPage {
        session: &signed_in.token,
        page: ACCOUNT_PAGE,
    };
    match state
        .control
        .create_own_token(&signed_in.actor, input, reveal)
        .await
    {
        Ok(_) => Ok(see_other("/account#new-token")),
        Err(ControlError::Invalid(errors)) => {
            let mut page = page(&state, &signed_in, FormErrors::default()).await?;
            page.token_label = form.label;
            page.token_expires_at = form.expires_at;
            page.token_read_only = form.read_only.is_some();
            page.token_errors = FormErrors::from_fields(&errors);
            render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /account/tokens/{id}/revoke`
pub async fn revoke_token(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    id: web::Path<String>,
    form: web::Form<super::session::CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    state
        .control
        .revoke_own_token(&signed_in.actor, &id)
        .await?;
    Ok(see_other("/account?done=token-revoked#tokens"))
}

pub async fn change_password(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<PasswordForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let result = state
        .control
        .change_own_password(
            &signed_in.actor,
            form.current_password,
            form.new_password,
            &form.confirm_password,
            Some(&signed_in.token),
        )
        .await;
    let errors = match result {
        Ok(()) => return Ok(see_other("/account?done=password-changed")),
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&errors),
        Err(e) => return Err(e.into()),
    };
    render_status(
        &page(&state, &signed_in, errors).await?,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
}
