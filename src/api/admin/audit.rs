use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

use crate::api::auth::AdminActor;
use crate::api::problem::Problem;
use crate::control::AuditView;
use crate::domain::FieldError;
use crate::state::AppState;
use crate::store::AuditFilter;

#[derive(Deserialize)]
pub struct AuditQuery {
    app: Option<String>,
    user: Option<String>,
    policy: Option<String>,
    change_set: Option<String>,
    page: Option<u32>,
}

#[utoipa::path(
    get, path = "/api/v1/audit", tag = "audit",
    params(("app" = Option<String>, Query, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("user" = Option<String>, Query, pattern = "^[a-z0-9][a-z0-9._-]{0,63}$"), ("policy" = Option<String>, Query, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"), ("change_set" = Option<String>, Query, pattern = "^[0-9a-f]{16}$", description = "the changes of one policy file's apply"), ("page" = Option<u32>, Query, minimum = 1, description = "1-based, 50 events a page")),
    responses(
        (status = 200, description = "Audit events, newest first", body = Vec<AuditView>),
        (status = 400, description = "Malformed query string, or a filter no name could match", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn list_audit(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    req: HttpRequest,
) -> Result<HttpResponse, Problem> {
    // Parsed here, after the token: extractors run concurrently, and a bad query string
    // must not answer 400 to a caller who should hear 401.
    let q = web::Query::<AuditQuery>::from_query(req.query_string())
        .map_err(|e| Problem::malformed(format!("bad query string: {e}")))?
        .into_inner();
    // A filter that no name could match is refused, rather than sent to SQL.
    let filter_value = |field: &str, s: Option<String>| -> Result<Option<String>, Problem> {
        match s.filter(|s| !s.is_empty()) {
            Some(v) if v.len() > 200 || v.chars().any(char::is_control) => Err(Problem::malformed(
                format!("{field}: not a name that could be filtered on"),
            )
            .with_fields(FieldError::new(field, "not a valid name").into())),
            other => Ok(other),
        }
    };
    let filter = AuditFilter {
        app: filter_value("app", q.app)?,
        user: filter_value("user", q.user)?,
        policy: filter_value("policy", q.policy)?,
        change_set: filter_value("change_set", q.change_set)?,
        from_ms: None,
        until_ms: None,
        visible_apps: None,
        page: q.page.unwrap_or(1).max(1),
        per_page: 0,
        peek_next: false,
    };
    Ok(HttpResponse::Ok().json(state.control.list_audit(&actor, filter).await?))
}
