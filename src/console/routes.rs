//! The console's route table: every page and form action, with the limits and error pages
//! of their requests.

use actix_web::error::{PathError, QueryPayloadError};
use actix_web::middleware::{Compress, DefaultHeaders, from_fn};
use actix_web::{HttpResponse, guard, web};
use tracing_actix_web::TracingLogger;

use super::error::ConsoleError;
use super::page::SECURITY_HEADERS;
use super::respond::see_other;
use super::{
    account, apps, assets, audit_log, load_limit, login, navigation, oidc_login, policies,
    policy_files, users,
};

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        // Registered after the APIs: this scope takes every other path. A span per
        // console request, with its route pattern (never on the acquire path).
        web::scope("")
            .wrap(from_fn(navigation::in_navigation))
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
            .route("/login/oidc", web::get().to(oidc_login::begin))
            .route("/login/oidc/callback", web::get().to(oidc_login::callback))
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
            .route("/apps/{slug}/webhooks", web::get().to(apps::webhooks::show))
            .route(
                "/apps/{slug}/webhooks",
                web::post().to(apps::webhooks::create),
            )
            .route(
                "/apps/{slug}/webhooks/{id}/rotate",
                web::post().to(apps::webhooks::rotate),
            )
            .route(
                "/apps/{slug}/webhooks/{id}/delete",
                web::post().to(apps::webhooks::delete),
            )
            .route(
                "/apps/{slug}/webhooks/{id}/deliveries/{delivery}/send-again",
                web::post().to(apps::webhooks::send_again),
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
                "/policies/{name:.+}/recreate",
                web::post().to(policies::recreate),
            )
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

fn security_headers() -> DefaultHeaders {
    SECURITY_HEADERS
        .iter()
        .fold(DefaultHeaders::new(), |headers, &pair| headers.add(pair))
}
