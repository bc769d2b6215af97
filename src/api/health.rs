use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::state::AppState;

/// The process is up.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// SQL and Redis both answer: this instance can serve.
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let sql = state.store.ping().await;
    let redis = state.limiter.ping().await;
    let body = json!({
        "sql": if sql.is_ok() { "ok" } else { "unreachable" },
        "redis": if redis.is_ok() { "ok" } else { "unreachable" },
    });
    if sql.is_ok() && redis.is_ok() {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
