//! HTTP: the acquire API, the admin JSON API, health, metrics and the OpenAPI document.

pub mod acquire;
mod acquire_all;
pub mod admin;
pub mod auth;
mod health;
pub mod json;
mod openapi;
mod openapi_creates;
pub mod problem;
mod query;
pub mod refund;
pub mod release;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, Resource, ResponseError, web};

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
    .service(resource("/v1/acquire", "POST").route(web::post().to(acquire::acquire)))
    .service(resource("/v1/release", "POST").route(web::post().to(release::release)))
    .service(resource("/v1/refund", "POST").route(web::post().to(refund::refund)))
    .service(resource("/healthz", "GET").route(web::get().to(health::healthz)))
    .service(resource("/readyz", "GET").route(web::get().to(health::readyz)))
    .service(resource("/metrics", "GET").route(web::get().to(health::metrics)))
    .service(resource("/api/openapi.json", "GET").route(web::get().to(openapi::document)))
    .configure(admin::routes);
}

/// A resource of the APIs that answers a method it does not serve with 405 and `Allow`
/// (a resource's default would be the app's 404).
fn resource(path: &str, allow: &'static str) -> Resource {
    web::resource(path).default_service(web::to(move |req: HttpRequest| async move {
        let mut response = Problem::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method-not-allowed",
            "Method not allowed",
            format!("{} {} is not served; use {allow}", req.method(), req.path()),
        )
        .error_response();
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static(allow));
        response
    }))
}

/// Whether a path belongs to the APIs (problem+json) rather than the console (HTML).
pub fn is_api_path(path: &str) -> bool {
    path.starts_with("/api/") || path.starts_with("/v1/")
}

/// The answer for an API path no route claims.
pub fn not_found(req: &HttpRequest) -> HttpResponse {
    Problem::not_found(format!("no route for {} {}", req.method(), req.path())).error_response()
}
