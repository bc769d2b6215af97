//! Signing in through the OpenID Connect provider: `GET /login/oidc` begins (the browser
//! goes to the provider with a new state, nonce and PKCE challenge, kept on the server),
//! `GET /login/oidc/callback` ends it (the code redeemed, the ID token checked, the user
//! found or made, a session started). Every refusal is the sign-in page again, saying
//! why, with the button to start over.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use secrecy::ExposeSecret;
use serde::Deserialize;

use super::error::ConsoleError;
use super::login::{NextQuery, render_form, safe_next, signed_in_as, too_many_attempts};
use super::respond::see_other;
use crate::auth::sign_in;
use crate::state::AppState;
use crate::store::{OidcSignInRecord, now_ms};

/// `GET /login/oidc[?next=]`: 303 to the provider.
pub async fn begin(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<NextQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let next = safe_next(query.next.as_deref());
    let Some(flow) = &state.sign_in.oidc else {
        return Err(ConsoleError::NotFound("page".to_owned()));
    };
    // Anyone may begin, and each beginning keeps a row and may read the provider: counted
    // in the sign-in attempts' buckets of the address (the name is no username).
    let address = req.peer_addr().map(|a| a.ip());
    if let Some(wait) = sign_in::take_attempt(
        &state.limiter,
        &state.sign_in_fallback,
        SSO_ATTEMPTS,
        address,
    )
    .await
    {
        let error = format!("Too many sign-in attempts from this address. Try again in {wait} s.");
        return too_many_attempts(&req, &state, next, String::new(), error, wait);
    }
    let (request, url) = match flow.begin().await {
        Ok(begun) => begun,
        Err(e) => {
            tracing::warn!(error = %e, "OpenID Connect sign-in not begun");
            let error = format!(
                "Signing in with {} is not possible now: {e}.",
                state.sign_in.oidc_name
            );
            return render_form(
                &req,
                &state,
                StatusCode::SERVICE_UNAVAILABLE,
                next,
                String::new(),
                Some(error),
            );
        }
    };
    let record = OidcSignInRecord {
        nonce: request.nonce.clone(),
        verifier: request.verifier.expose_secret().to_owned(),
        next_path: next,
        created_ms: now_ms(),
    };
    state
        .control
        .keep_oidc_sign_in(&request.state, &record)
        .await?;
    Ok(see_other(url.as_str()))
}

/// The sign-in guard's name for beginnings at the provider: no username can be it.
const SSO_ATTEMPTS: &str = "(single sign-on)";

#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /login/oidc/callback?code=&state=`: a session, or the sign-in page saying why not.
pub async fn callback(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<CallbackQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let Some(flow) = &state.sign_in.oidc else {
        return Err(ConsoleError::NotFound("page".to_owned()));
    };
    let refuse = |status: StatusCode, next: String, why: String| {
        tracing::info!(why = %why, "OpenID Connect sign-in refused");
        render_form(&req, &state, status, next, String::new(), Some(why))
    };
    let begun = match query.state.as_deref() {
        Some(s) if !s.is_empty() => state.control.take_oidc_sign_in(s).await?,
        _ => None,
    };
    let Some(begun) = begun else {
        return refuse(
            StatusCode::BAD_REQUEST,
            safe_next(None),
            "This sign-in was not begun here, was already used, or took longer than ten \
             minutes. Start again."
                .to_owned(),
        );
    };
    let next = safe_next(Some(&begun.next_path));
    if let Some(error) = &query.error {
        let detail = query
            .error_description
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        let why = format!(
            "{} did not sign you in: {error}{detail}.",
            state.sign_in.oidc_name
        );
        return refuse(StatusCode::UNAUTHORIZED, next, why);
    }
    let Some(code) = query.code.as_deref().filter(|c| !c.is_empty()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            next,
            "The identity provider sent no code back. Start again.".to_owned(),
        );
    };
    let verifier = secrecy::SecretString::from(begun.verifier.clone());
    let claims = match flow.finish(code, &begun.nonce, &verifier).await {
        Ok(claims) => claims,
        Err(e) => {
            return refuse(
                StatusCode::UNAUTHORIZED,
                next,
                format!("Not signed in: {e}."),
            );
        }
    };
    let admin_group = flow.settings().admin_group.as_deref();
    let user = match state.control.oidc_user(&claims, admin_group).await? {
        Ok(user) => user,
        Err(refused) => {
            return refuse(
                StatusCode::FORBIDDEN,
                next,
                format!("Not signed in: {refused}."),
            );
        }
    };
    let address = req.peer_addr().map(|a| a.ip());
    sign_in::forgive(
        &state.limiter,
        &state.sign_in_fallback,
        SSO_ATTEMPTS,
        address,
    )
    .await;
    signed_in_as(&req, &state, &user, next).await
}
