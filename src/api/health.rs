use actix_web::{HttpResponse, web};
use serde_json::{Map, Value, json};

use crate::state::AppState;

/// The process is up.
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// SQL and Redis both answer: this instance can serve. When one does not, the body says
/// which and why (`sql_error`, `redis_error`), for the operator looking.
pub async fn readyz(state: web::Data<AppState>) -> HttpResponse {
    let (sql, redis) = tokio::join!(state.store.ping(), state.limiter.ping());
    let mut body = Map::new();
    let mut ready = true;
    for (name, result) in [
        ("sql", sql.map_err(|e| e.to_string())),
        ("redis", redis.map_err(|e| e.to_string())),
    ] {
        match result {
            Ok(()) => {
                body.insert(name.into(), "ok".into());
            }
            Err(why) => {
                ready = false;
                body.insert(name.into(), "unreachable".into());
                body.insert(format!("{name}_error"), Value::String(why));
            }
        }
    }
    if ready {
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
