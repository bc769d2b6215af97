//! What a console request that cannot go on answers: a redirect to sign in, or an HTML
//! error page with the right status, inside the signed-in user's navigation when there is
//! one. Internal error text is logged, never shown.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, ContentType};
use actix_web::{HttpResponse, ResponseError};
use askama::Template;

use super::page::{Chrome, SECURITY_HEADERS};
use crate::control::ControlError;
use crate::telemetry::{Outage, warn_outage};

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// Not signed in: off to the login page, coming back to `next` afterwards.
    #[error("sign-in required")]
    SignInRequired { next: String },
    #[error("not permitted")]
    Forbidden,
    #[error("the form was stale or forged (CSRF token mismatch)")]
    Csrf,
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    /// Redis or the database cannot be reached right now.
    #[error("{0} is unavailable")]
    Unavailable(Service),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// A service the console depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Redis,
    Database,
}

impl std::fmt::Display for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Redis => "redis",
            Self::Database => "the database",
        })
    }
}

impl From<ControlError> for ConsoleError {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::NotFound(what) => Self::NotFound(what.to_owned()),
            ControlError::Forbidden => Self::Forbidden,
            ControlError::Invalid(errors) => Self::BadRequest(
                errors
                    .0
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            ControlError::Conflict(message) => Self::Conflict(message),
            e @ (ControlError::LastOwner { .. } | ControlError::OwnsPolicies { .. }) => {
                Self::Conflict(e.to_string())
            }
            ControlError::VersionConflict { current } => Self::Conflict(format!(
                "the policy was changed meanwhile; its version is now {current}"
            )),
            ControlError::RedisUnavailable(e) => {
                warn_outage(Outage::Redis, "console", &e);
                Self::Unavailable(Service::Redis)
            }
            ControlError::DatabaseUnavailable(e) => {
                warn_outage(Outage::Database, "console", &e);
                Self::Unavailable(Service::Database)
            }
            ControlError::Aborted(ref cause) => {
                tracing::warn!(error = format!("{cause:#}"), "console: transaction aborted");
                Self::Conflict(e.to_string())
            }
            ControlError::Internal(e) => Self::Internal(e),
        }
    }
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    chrome: Chrome,
    status: u16,
    title: &'static str,
    message: String,
}

impl ResponseError for ConsoleError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::SignInRequired { .. } => StatusCode::SEE_OTHER,
            Self::Forbidden | Self::Csrf => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let Self::SignInRequired { next } = self {
            let target = format!("/login?next={}", super::format::url_encode(next));
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, target))
                .finish();
        }
        if let Self::Internal(e) = self {
            // The cause chain, not `{:?}`: that is a backtrace too when RUST_BACKTRACE is set.
            tracing::error!(error = format!("{e:#}"), "console request failed");
        }
        let (title, message) = self.page_text();
        render_error(self.status_code(), title, message, Chrome::error_page())
    }
}

impl ConsoleError {
    /// The error page's title and message.
    pub(super) fn page_text(&self) -> (&'static str, String) {
        match self {
            Self::SignInRequired { .. } => ("Sign-in required", "Sign in first.".to_owned()),
            Self::Forbidden => (
                "Not permitted",
                "Your role does not allow this. Ask an owner of the application or an admin."
                    .to_owned(),
            ),
            Self::Csrf => (
                "Form expired",
                "This form was not sent from a page of your current session (or the page is \
                 too old). Go back, reload the page and try again."
                    .to_owned(),
            ),
            Self::NotFound(what) => ("Not found", format!("There is no such {what}.")),
            Self::BadRequest(message) => ("Bad request", message.clone()),
            Self::Conflict(message) => ("Conflict", message.clone()),
            Self::Unavailable(Service::Redis) => (
                "Redis unavailable",
                "The limiter's Redis cannot be reached right now; try again shortly.".to_owned(),
            ),
            Self::Unavailable(Service::Database) => (
                "Database unavailable",
                "ratekeeper's database cannot be reached right now, so the console cannot \
                 show or change anything; try again shortly. Acquires go on meanwhile."
                    .to_owned(),
            ),
            Self::Internal(_) => (
                "Something went wrong",
                "The server could not complete this request; the details are in its log."
                    .to_owned(),
            ),
        }
    }
}

pub fn render_error(
    status: StatusCode,
    title: &'static str,
    message: String,
    chrome: Chrome,
) -> HttpResponse {
    let page = ErrorPage {
        chrome,
        status: status.as_u16(),
        title,
        message,
    };
    match page.render() {
        Ok(body) => {
            let mut response = HttpResponse::build(status);
            response.content_type(ContentType::html());
            // Also for pages served outside the console's scope (a path no route claims).
            for header in SECURITY_HEADERS {
                response.insert_header(header);
            }
            response.body(body)
        }
        Err(e) => {
            tracing::error!(error = %e, "error page did not render");
            HttpResponse::build(status).finish()
        }
    }
}
