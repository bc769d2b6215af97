//! Sign-in and sign-out. The login form carries a CSRF token of its own (a cookie and a
//! hidden field that must match), since there is no session yet to hold one.

use actix_web::cookie::time::Duration;
use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::error::ConsoleError;
use super::page::Chrome;
use super::respond::{render_status, see_other};
use super::session::CsrfForm;
use super::session::{SESSION_COOKIE, SignedIn, constant_time_eq, cookie, removal};
use crate::auth::sign_in;
use crate::auth::{Secret, SecretKind};
use crate::control::SESSION_LIFETIME_MS;
use crate::state::AppState;

const LOGIN_CSRF_COOKIE: &str = "rk_login_csrf";

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    chrome: Chrome,
    /// The form's own CSRF token, also set as a cookie (there is no session yet).
    csrf: SecretString,
    next: String,
    username: String,
    error: Option<String>,
    /// The password form is shown.
    password: bool,
    /// The OpenID Connect provider's name on its button, when there is one.
    oidc_name: Option<String>,
}

impl LoginPage {
    /// The one place the token is exposed: into the form it protects.
    fn csrf_value(&self) -> &str {
        self.csrf.expose_secret()
    }
}

#[derive(Debug, Deserialize)]
pub struct NextQuery {
    pub(super) next: Option<String>,
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: SecretString,
    #[serde(default)]
    csrf: SecretString,
    #[serde(default)]
    next: String,
}

/// Only a path of this site: an absolute URL or `//host` would make the login page an
/// open redirect.
pub(super) fn safe_next(next: Option<&str>) -> String {
    match next {
        // Visible ASCII only: browsers drop tabs and line breaks from URLs ("/\t/evil"
        // becomes "//evil"), and a Location header cannot hold them.
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.contains('\\')
                && n.chars().all(|c| c.is_ascii_graphic()) =>
        {
            n.to_owned()
        }
        _ => "/apps".to_owned(),
    }
}

pub async fn show(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<NextQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let next = safe_next(query.next.as_deref());
    if let Some(token) = req.cookie(SESSION_COOKIE)
        && state
            .control
            .session(&SecretString::from(token.value()))
            .await?
            .is_some()
    {
        return Ok(see_other(&next));
    }
    render_form(&req, &state, StatusCode::OK, next, String::new(), None)
}

/// The sign-in page refusing an attempt with 429, and when to try again.
pub(super) fn too_many_attempts(
    req: &HttpRequest,
    state: &AppState,
    next: String,
    username: String,
    error: String,
    wait: i64,
) -> Result<HttpResponse, ConsoleError> {
    let mut response = render_form(
        req,
        state,
        StatusCode::TOO_MANY_REQUESTS,
        next,
        username,
        Some(error),
    )?;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from(wait));
    Ok(response)
}

/// The sign-in page, answering `status`, with `error` said over its form.
pub(super) fn render_form(
    req: &HttpRequest,
    state: &AppState,
    status: StatusCode,
    next: String,
    username: String,
    error: Option<String>,
) -> Result<HttpResponse, ConsoleError> {
    let csrf = Secret::generate(SecretKind::Session).hash;
    let page = LoginPage {
        chrome: Chrome::anonymous(),
        csrf: SecretString::from(csrf.as_str()),
        next,
        username,
        error,
        password: state.sign_in.password,
        oidc_name: state
            .sign_in
            .oidc
            .as_ref()
            .map(|_| state.sign_in.oidc_name.clone()),
    };
    let mut response = render_status(&page, status)?;
    response
        .add_cookie(&cookie(req, LOGIN_CSRF_COOKIE, csrf, Duration::hours(2)))
        .map_err(anyhow::Error::from)?;
    Ok(response)
}

pub async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, ConsoleError> {
    let form = form.into_inner();
    let next = safe_next(Some(&form.next));
    let cookie_csrf = req.cookie(LOGIN_CSRF_COOKIE).map(|c| c.value().to_owned());
    if !cookie_csrf.is_some_and(|c| {
        !c.is_empty() && constant_time_eq(c.as_bytes(), form.csrf.expose_secret().as_bytes())
    }) {
        return Err(ConsoleError::Csrf);
    }
    let username = form.username.trim().to_owned();
    if !state.sign_in.password {
        let error = "Passwords are switched off here: use the button above.".to_owned();
        return render_form(
            &req,
            &state,
            StatusCode::FORBIDDEN,
            next,
            username,
            Some(error),
        );
    }
    if username.is_empty() || form.password.expose_secret().is_empty() {
        let error = "Enter your username and password.".to_owned();
        return render_form(
            &req,
            &state,
            StatusCode::UNPROCESSABLE_ENTITY,
            next,
            username,
            Some(error),
        );
    }

    let address = req.peer_addr().map(|a| a.ip());
    if let Some(wait) =
        sign_in::take_attempt(&state.limiter, &state.sign_in_fallback, &username, address).await
    {
        let error = format!(
            "Too many sign-in attempts for this user or from this address. Try again in {wait} s."
        );
        return too_many_attempts(&req, &state, next, username, error, wait);
    }

    let Some(user) = state
        .control
        .check_password(&username, form.password)
        .await?
    else {
        let error = "Unknown username or wrong password (or the account is disabled).".to_owned();
        return render_form(
            &req,
            &state,
            StatusCode::UNAUTHORIZED,
            next,
            username,
            Some(error),
        );
    };
    sign_in::forgive(&state.limiter, &state.sign_in_fallback, &username, address).await;

    signed_in_as(&req, &state, &user, next).await
}

/// The session `user` signs in to, its cookie set, and the browser sent to `next`.
pub(super) async fn signed_in_as(
    req: &HttpRequest,
    state: &AppState,
    user: &crate::store::UserRecord,
    next: String,
) -> Result<HttpResponse, ConsoleError> {
    // A new session id at every sign-in; a session this browser had before ends.
    if let Some(old) = req.cookie(SESSION_COOKIE) {
        state
            .control
            .end_session(&SecretString::from(old.value()))
            .await?;
    }
    let session = state.control.start_session(user).await?;
    tracing::info!(user = %user.username, "console sign-in");
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, next))
        .cookie(cookie(
            req,
            SESSION_COOKIE,
            session.token.expose_secret().to_owned(),
            Duration::milliseconds(SESSION_LIFETIME_MS),
        ))
        .cookie(removal(req, LOGIN_CSRF_COOKIE))
        .finish())
}

pub async fn logout(
    req: HttpRequest,
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    state.control.end_session(&signed_in.token).await?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/login"))
        .cookie(removal(&req, SESSION_COOKIE))
        .finish())
}
