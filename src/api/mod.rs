//! HTTP: the acquire API, the admin JSON API, health, metrics and the OpenAPI document.

pub mod acquire;
pub mod admin;
pub mod auth;
mod health;
pub mod json;
mod openapi;
pub mod problem;
pub mod release;

use actix_web::{HttpRequest, HttpResponse, ResponseError, web};

use problem::Problem;

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

/// Whether a path belongs to the APIs (problem+json) rather than the console (HTML).
pub fn is_api_path(path: &str) -> bool {
    path.starts_with("/api/") || path.starts_with("/v1/")
}

/// The answer for an API path no route claims.
pub fn not_found(req: &HttpRequest) -> HttpResponse {
    Problem::not_found(format!("no route for {} {}", req.method(), req.path())).error_response()
}
