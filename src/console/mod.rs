//! The web console: server-rendered askama pages over the same `control` operations (and so
//! the same permission rules) as the JSON API, with a small script for the live state.
//! Handlers parse the form, check the session and its CSRF token, call `control`, render.

mod account;
mod apps;
mod assets;
mod audit_log;
mod chart;
mod csv;
mod diff;
mod error;
mod format;
mod forms;
mod html_form;
mod load_limit;
mod login;
mod login_guard;
mod page;
mod policies;
mod policy_files;
mod session;
mod users;

use actix_web::error::{PathError, QueryPayloadError};
use actix_web::http::StatusCode;
use actix_web::http::header::{self, ContentType};
use actix_web::middleware::{Compress, DefaultHeaders, from_fn};
use actix_web::{HttpRequest, HttpResponse, guard, web};
use askama::Template;
use tracing_actix_web::TracingLogger;

pub use error::ConsoleError;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        // Registered after the APIs: this scope takes every other path. A span per
        // console request, with its route pattern (never on the acquire path).
        web::scope("")
            .wrap(from_fn(error::in_navigation))
            .wrap(TracingLogger::default())
            .wrap(security_headers())
            // gzip or brotli, as the browser accepts: a page of 200 policies is ~10x smaller.
            .wrap(Compress::default())
            // Outermost: a request waiting for its turn holds nothing else.
            .wrap(from_fn(load_limit::one_share))
            .app_data(form_config(FORM_LIMIT))
            .app_data(web::QueryConfig::default().error_handler(|e, _| bad_query(e).into()))
            .app_data(web::PathConfig::default().error_handler(|e, _| bad_path(e).into()))
            .route("/", web::get().to(home))
            .route("/static/{file}", web::get().to(assets::serve))
            .route("/login", web::get().to(login::show))
            .route("/login", web::post().to(login::submit))
            .route("/logout", web::post().to(login::logout))
            .route("/apps", web::get().to(apps::list::list))
            .route("/apps", web::post().to(apps::list::create))
            .route("/apps/{slug}", web::get().to(apps::page::show))
            .route("/apps/{slug}/live", web::get().to(apps::page::live))
            .route(
                "/apps/{slug}/settings",
                web::post().to(apps::settings::save),
            )
            .route(
                "/apps/{slug}/delete",
                web::get().to(apps::settings::confirm),
            )
            .route(
                "/apps/{slug}/delete",
                web::post().to(apps::settings::delete),
            )
            .route("/apps/{slug}/members", web::post().to(apps::members::save))
            .route(
                "/apps/{slug}/members/{username}/remove",
                web::post().to(apps::members::remove),
            )
            .route("/apps/{slug}/keys", web::post().to(apps::keys::create))
            .route(
                "/apps/{slug}/keys/{id}/revoke",
                web::post().to(apps::keys::revoke),
            )
            .route(
                "/apps/{slug}/keys/{id}/rotate",
                web::post().to(apps::keys::rotate),
            )
            .route(
                "/apps/{slug}/policies.yaml",
                web::get().to(policy_files::download::download),
            )
            .route("/apps/{slug}/policies/new", web::get().to(policies::new))
            .service(
                web::resource("/apps/{slug}/policies")
                    .guard(guard::Post())
                    .app_data(web::PayloadConfig::new(POLICY_FORM_LIMIT))
                    .route(web::post().to(policies::create)),
            )
            // Policy names may contain '/': the action is the last segment.
            .route(
                "/policies/{name:.+}/overview",
                web::get().to(policies::show),
            )
            .route("/policies/{name:.+}/reset", web::post().to(policies::reset))
            .route(
                "/policies/{name:.+}/history",
                web::get().to(policies::history),
            )
            .route(
                "/policies/{name:.+}/rollback",
                web::post().to(policies::rollback),
            )
            .route("/policies/{name:.+}/edit", web::get().to(policies::edit))
            .service(
                web::resource("/policies/{name:.+}/edit")
                    .guard(guard::Post())
                    .app_data(web::PayloadConfig::new(POLICY_FORM_LIMIT))
                    .route(web::post().to(policies::update)),
            )
            .route(
                "/policies/{name:.+}/delete",
                web::get().to(policies::confirm_delete),
            )
            .route(
                "/policies/{name:.+}/delete",
                web::post().to(policies::delete),
            )
            // A policy's permalink; after the actions, so `/policies/a/edit` stays an action
            // (see `format::policy_href`).
            .route("/policies/{name:.+}", web::get().to(policies::show))
            .route(
                "/policy-files/apply",
                web::get().to(policy_files::apply::show),
            )
            .service(
                web::resource("/policy-files/plan")
                    .guard(guard::Post())
                    .app_data(form_config(policy_files::apply::FORM_LIMIT))
                    .route(web::post().to(policy_files::apply::plan)),
            )
            .service(
                web::resource("/policy-files/apply")
                    .guard(guard::Post())
                    .app_data(form_config(policy_files::apply::FORM_LIMIT))
                    .route(web::post().to(policy_files::apply::apply)),
            )
            .route("/users", web::get().to(users::list))
            .route("/users", web::post().to(users::create))
            .route("/users/{username}", web::post().to(users::update))
            .route(
                "/users/{username}/password",
                web::post().to(users::reset_password),
            )
            .route("/account", web::get().to(account::show))
            .route(
                "/account/password",
                web::post().to(account::change_password),
            )
            .route("/account/tokens", web::post().to(account::create_token))
            .route(
                "/account/tokens/{id}/revoke",
                web::post().to(account::revoke_token),
            )
            .route("/audit", web::get().to(audit_log::list))
            .route("/audit.csv", web::get().to(audit_log::export)),
    );
}

/// The largest form body a console page sends.
const FORM_LIMIT: usize = 64 * 1024;

/// The policy form's (read by `HtmlForm`, whose limit is the route's `PayloadConfig`):
/// 1,000 overrides with keys of up to 256 bytes, percent-encoded.
const POLICY_FORM_LIMIT: usize = 1024 * 1024;

fn form_config(limit: usize) -> web::FormConfig {
    web::FormConfig::default()
        .limit(limit)
        .error_handler(|e, _| {
            ConsoleError::BadRequest(format!("The form could not be read: {e}")).into()
        })
}

/// A query string a page cannot read, said in words: a field's own rule names it ("page
/// must be a whole number"), never the parser's internals.
fn bad_query(e: QueryPayloadError) -> ConsoleError {
    let why = match &e {
        QueryPayloadError::Deserialize(inner) => inner.to_string(),
        other => other.to_string(),
    };
    ConsoleError::BadRequest(format!(
        "The address asks for something this page cannot show: {}.",
        in_words(&why)
    ))
}

fn bad_path(e: PathError) -> ConsoleError {
    let why = match &e {
        PathError::Deserialize(inner) => inner.to_string(),
        other => other.to_string(),
    };
    ConsoleError::BadRequest(format!(
        "This address does not name a page here: {}.",
        in_words(&why)
    ))
}

/// A parser's message in plain words where it has a familiar one.
fn in_words(message: &str) -> String {
    match message {
        "invalid digit found in string" => "a number has a character that is not a digit".into(),
        "number too large to fit in target type" => "a number is too large".into(),
        other => other.trim_end_matches('.').to_owned(),
    }
}

async fn home() -> HttpResponse {
    see_other("/apps")
}

pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location.to_owned()))
        .finish()
}

/// A page as an HTML response.
pub fn render(page: &impl Template) -> Result<HttpResponse, ConsoleError> {
    render_status(page, StatusCode::OK)
}

/// A page as an HTML response with another status (a form back with its errors: 422).
pub fn render_status(
    page: &impl Template,
    status: StatusCode,
) -> Result<HttpResponse, ConsoleError> {
    let body = page.render().map_err(anyhow::Error::from)?;
    Ok(HttpResponse::build(status)
        .content_type(ContentType::html())
        .body(body))
}

/// What every console page is sent with: a strict Content-Security-Policy (scripts,
/// styles and fetches from this site only, no inline script, never framed), no MIME
/// sniffing, and no full URLs leaked to other sites in `Referer`.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "same-origin"),
];

fn security_headers() -> DefaultHeaders {
    SECURITY_HEADERS
        .iter()
        .fold(DefaultHeaders::new(), |headers, &pair| headers.add(pair))
}

/// The page for a console path no route claims, in the chrome of whoever asks (see
/// `error::in_navigation`).
pub async fn not_found(req: &HttpRequest) -> HttpResponse {
    let chrome = error::Viewer::of(req, false).await.chrome();
    let path = req.path();
    error::render_error(
        StatusCode::NOT_FOUND,
        "Page not found",
        format!("Nothing lives at {path}. Check the address, or start from your applications."),
        chrome,
    )
}
