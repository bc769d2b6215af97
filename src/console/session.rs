//! The signed-in user of a console request, from the session cookie, and the cookies
//! themselves. A session is a row in SQL (see `store::sessions`), so every instance
//! knows it and signing out ends it everywhere.

use std::future::Future;
use std::pin::Pin;

use actix_web::cookie::{Cookie, SameSite, time::Duration};
use actix_web::{FromRequest, HttpMessage, HttpRequest, dev::Payload, web};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::error::ConsoleError;
use super::page::{Chrome, ChromeUser};
use crate::auth::Actor;
use crate::state::AppState;

pub const SESSION_COOKIE: &str = "rk_session";

/// A signed-in user with a live session.
pub struct SignedIn {
    pub actor: Actor,
    /// The session's CSRF token: every form carries it, every POST must match it.
    pub csrf: SecretString,
    /// The session cookie's token (to keep this session when others are ended).
    pub token: SecretString,
}

impl SignedIn {
    pub fn chrome(&self, section: &'static str) -> Chrome {
        Chrome {
            user: Some(self.chrome_user()),
            section,
            notice: None,
        }
    }

    fn chrome_user(&self) -> ChromeUser {
        ChromeUser {
            name: self.actor.name.clone(),
            is_admin: self.actor.is_admin,
            csrf: self.csrf.clone(),
        }
    }

    /// Refuses a form whose CSRF token is not this session's.
    pub fn check_csrf(&self, presented: &SecretString) -> Result<(), ConsoleError> {
        let (presented, expected) = (presented.expose_secret(), self.csrf.expose_secret());
        if constant_time_eq(presented.as_bytes(), expected.as_bytes()) {
            Ok(())
        } else {
            Err(ConsoleError::Csrf)
        }
    }
}

/// Equal-length comparison that looks at every byte, so timing reveals no prefix.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl FromRequest for SignedIn {
    type Error = ConsoleError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let token = req
            .cookie(SESSION_COOKIE)
            .map(|c| SecretString::from(c.value()));
        // Back to the page asked for after signing in, for GETs; a POST's page is gone.
        let next = if req.method() == actix_web::http::Method::GET {
            req.uri()
                .path_and_query()
                .map_or("/apps".to_owned(), |pq| pq.as_str().to_owned())
        } else {
            "/apps".to_owned()
        };
        let req = req.clone();
        Box::pin(async move {
            let state = state.ok_or_else(|| anyhow::anyhow!("app state missing"))?;
            let sign_in = || ConsoleError::SignInRequired { next: next.clone() };
            let token = token.ok_or_else(sign_in)?;
            let session = state.control.session(&token).await?.ok_or_else(sign_in)?;
            let signed_in = SignedIn {
                actor: Actor::from_user(&session.user, crate::auth::Source::Console),
                csrf: session.csrf_token,
                token,
            };
            // For an error page of this request: shown inside this user's navigation.
            req.extensions_mut().insert(signed_in.chrome_user());
            Ok(signed_in)
        })
    }
}

/// Whether the browser reached us over TLS (directly, or through a proxy that says so
/// with `Forwarded` / `X-Forwarded-Proto`): then cookies are marked Secure.
pub fn over_tls(req: &HttpRequest) -> bool {
    req.connection_info().scheme() == "https"
}

/// A console cookie: HttpOnly (no script reads it), SameSite=Lax (not sent on another
/// site's POST), Secure over TLS, for the whole site.
pub fn cookie(
    req: &HttpRequest,
    name: &'static str,
    value: String,
    max_age: Duration,
) -> Cookie<'static> {
    Cookie::build(name, value)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(over_tls(req))
        .max_age(max_age)
        .finish()
}

/// A cookie that tells the browser to forget `name`.
pub fn removal(req: &HttpRequest, name: &'static str) -> Cookie<'static> {
    cookie(req, name, String::new(), Duration::ZERO)
}

/// A form that carries nothing but the session's CSRF token (a button that acts).
#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: SecretString,
}
