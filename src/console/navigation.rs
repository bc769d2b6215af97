//! Error pages in the chrome of whoever asked: signed in, signed out, or unknown.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, ResponseError, web};
use secrecy::SecretString;

use super::error::{ConsoleError, Service, render_error};
use super::page::{Chrome, ChromeUser};
use super::session::SESSION_COOKIE;
use crate::state::AppState;

/// Middleware of the console: an error page is rendered again in the chrome of whoever
/// made the request: inside the navigation of the user who is signed in (known from the
/// request when its handler read the session, else looked up from the cookie), so that an
/// error never strands them; without any navigation for someone signed out (no session
/// cookie, or one of no session), as the sign-in page shows.
pub async fn in_navigation(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let res = next.call(req).await?.map_into_boxed_body();
    let Some(error) = res
        .response()
        .error()
        .and_then(|e| e.as_error::<ConsoleError>())
    else {
        return Ok(res);
    };
    if matches!(error, ConsoleError::SignInRequired { .. }) {
        return Ok(res);
    }
    let database_down = matches!(error, ConsoleError::Unavailable(Service::Database));
    let (status, (title, message)) = (error.status_code(), error.page_text());
    let chrome = match Viewer::of(res.request(), database_down).await {
        // The page as rendered: the navigation without a name.
        Viewer::Unknown => return Ok(res),
        known => known.chrome(),
    };
    let (req, _) = res.into_parts();
    Ok(ServiceResponse::new(
        req,
        render_error(status, title, message, chrome),
    ))
}

/// Who made a request, as far as an error page can tell.
pub enum Viewer {
    SignedIn(ChromeUser),
    /// No session cookie, or one that names no live session.
    SignedOut,
    /// A session cookie the database could not check (it may be what failed).
    Unknown,
}

impl Viewer {
    /// `database_down`: the request failed for want of the database, so it is not asked
    /// again about the session.
    pub async fn of(req: &HttpRequest, database_down: bool) -> Self {
        if let Some(user) = req.extensions().get::<ChromeUser>().cloned() {
            return Self::SignedIn(user);
        }
        let Some(cookie) = req.cookie(SESSION_COOKIE) else {
            return Self::SignedOut;
        };
        let Some(state) = req.app_data::<web::Data<AppState>>() else {
            return Self::Unknown;
        };
        if database_down {
            return Self::Unknown;
        }
        match state
            .control
            .session(&SecretString::from(cookie.value()))
            .await
        {
            Ok(Some(session)) => Self::SignedIn(ChromeUser {
                name: session.user.username.clone(),
                is_admin: session.user.is_admin(),
                csrf: session.csrf_token,
            }),
            Ok(None) => Self::SignedOut,
            Err(_) => Self::Unknown,
        }
    }

    /// The chrome of an error page for this viewer.
    pub fn chrome(self) -> Chrome {
        match self {
            Self::SignedIn(user) => Chrome {
                user: Some(user),
                section: "error",
                notice: None,
            },
            Self::SignedOut => Chrome::anonymous(),
            Self::Unknown => Chrome::error_page(),
        }
    }
}

/// The page for a console path no route claims, in the chrome of whoever asks (see
/// `error::in_navigation`).
pub async fn not_found(req: &HttpRequest) -> HttpResponse {
    let chrome = Viewer::of(req, false).await.chrome();
    let path = req.path();
    render_error(
        StatusCode::NOT_FOUND,
        "Page not found",
        format!("Nothing lives at {path}. Check the address, or start from your applications."),
        chrome,
    )
}
