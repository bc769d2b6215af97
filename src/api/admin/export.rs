//! Policies as a file (README "Policy files"): the export and the format's JSON Schema.

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};

use super::policies::ListQuery;
use crate::api::auth::AdminActor;
use crate::api::problem::Problem;
use crate::api::query::TextQuery;
use crate::policy_file;
use crate::state::AppState;

#[utoipa::path(
    get, path = "/api/v1/export", tag = "policies", params(("app" = Option<String>, Query, pattern = "^[a-z0-9][a-z0-9-]{1,62}$", description = "an application slug")),
    responses(
        (status = 200, description = "The policies of the application, or of every application the caller may see, as a policy file (its schema: /api/v1/policies/schema.json): YAML, or JSON on `Accept: application/json`",
            content((serde_json::Value = "application/yaml"), (serde_json::Value = "application/json"))),
        (status = 400, description = "Malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application, or one the caller may not see (the same answer)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn export(
    req: HttpRequest,
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    query: TextQuery<ListQuery>,
) -> Result<HttpResponse, Problem> {
    let policies = state
        .control
        .export_policies(&actor, query.app.as_deref())
        .await?;
    if wants_json(&req) {
        return Ok(HttpResponse::Ok()
            .content_type("application/json")
            .body(policy_file::to_json(&policies)));
    }
    let yaml = policy_file::to_yaml(&policies).map_err(|e| {
        tracing::error!(error = %e, "cannot write the policies as YAML");
        Problem::internal()
    })?;
    Ok(HttpResponse::Ok()
        .content_type("application/yaml")
        .body(yaml))
}

/// Whether the client asks for JSON rather than the default YAML.
fn wants_json(req: &HttpRequest) -> bool {
    req.headers()
        .get_all(header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.split(';').next().unwrap_or_default().trim() == "application/json")
}

/// Where the policy file's JSON Schema is served.
pub const SCHEMA_PATH: &str = "/api/v1/policies/schema.json";

#[utoipa::path(
    get, path = "/api/v1/policies/schema.json", tag = "policies",
    responses(
        (status = 200, description = "The JSON Schema of a policy file (no token needed)", body = serde_json::Value, content_type = "application/schema+json"),
    ),
)]
pub async fn schema() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/schema+json")
        .body(policy_file::schema().to_string())
}
