//! HTTP: the acquire API, the admin JSON API, health, metrics and the OpenAPI document.

pub mod acquire;
pub mod admin;
mod health;
pub mod json;
mod openapi;
pub mod problem;
pub mod release;

use actix_web::{HttpRequest, web};

use crate::limiter::Limiter;
use problem::Problem;

/// The limiter of the HTTP worker thread serving the request (see
/// [`Limiter::for_this_thread`]).
pub struct WorkerLimiter(pub Limiter);

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.app_data(
        web::QueryConfig::default()
            .error_handler(|e, _| Problem::malformed(format!("bad query string: {e}")).into()),
    )
    .app_data(
        web::PathConfig::default()
            .error_handler(|e, _| Problem::malformed(format!("bad path: {e}")).into()),
    )
    .route("/v1/acquire", web::post().to(acquire::acquire))
    .route("/v1/release", web::post().to(release::release))
    .route("/healthz", web::get().to(health::healthz))
    .route("/readyz", web::get().to(health::readyz))
    .route("/metrics", web::get().to(health::metrics))
    .route("/api/openapi.json", web::get().to(openapi::document))
    .configure(admin::routes);
}

/// The answer for any path no route claims.
pub async fn not_found(req: HttpRequest) -> Result<actix_web::HttpResponse, Problem> {
    Err(Problem::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.path()
    )))
}
