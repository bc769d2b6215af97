//! Plan and apply a policy file (README "Policy files"): the body is the file, YAML or
//! JSON; `dry_run` answers the plan only.

use actix_web::error::PayloadError;
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde::Deserialize;

use crate::api::auth::AdminActor;
use crate::api::json::unreadable;
use crate::api::problem::Problem;
use crate::api::query::TextQuery;
use crate::control::{ApplyError, Plan};
use crate::domain::{FieldError, FieldErrors};
use crate::policy_file::{self, Caps, FileErrors};
use crate::state::AppState;

#[derive(Deserialize)]
pub struct ApplyQuery {
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    prune: bool,
    plan_id: Option<String>,
}

#[utoipa::path(
    post, path = "/api/v1/apply", tag = "policies",
    params(
        ("dry_run" = Option<bool>, Query, description = "answer the plan only, changing nothing"),
        ("prune" = Option<bool>, Query, description = "delete the policies of the file's applications that it does not list"),
        ("plan_id" = Option<String>, Query, description = "apply only if the plan is still this one (from a dry run)"),
    ),
    request_body(description = "A policy file (its schema: /api/v1/policies/schema.json)",
        content((String = "application/yaml"), (serde_json::Value = "application/json"))),
    responses(
        (status = 200, description = "The plan: per policy create, update (with its field changes), unchanged or delete; applied unless a dry run", body = Plan),
        (status = 400, description = "Malformed query string, or a body that cannot be read or is not UTF-8", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "The caller may change no application's policies (the file is not read), or the file touches applications whose policies the caller may not change (named)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The plan is no longer `plan_id` (the policies that changed named), or a policy was created meanwhile", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "A body over 16 MiB, the most one file may have", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid file: each error names the document, the line and the field (the first 100, then how many more); or a file over a cap (nesting depth, values, policies), named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn apply(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    query: TextQuery<ApplyQuery>,
    // A body over the size cap is a 413; one cut short a 400 like the JSON bodies'.
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, Problem> {
    let body = body.map_err(|e| match e.as_error::<PayloadError>() {
        Some(PayloadError::Overflow) => too_large(),
        _ => unreadable(e),
    })?;
    // Authorised before reading: a file costs CPU to read, which a user who may change
    // no application's policies must not be able to spend.
    if !state.control.may_edit_any_app(&actor).await? {
        return Err(Problem::forbidden(
            "you may not change the policies of any application",
        ));
    }
    let text = String::from_utf8(body.into())
        .map_err(|_| Problem::malformed("the policy file is not UTF-8 text"))?;
    let file = policy_file::parse_off_thread(text, Caps::FILE)
        .await
        .map_err(|e| {
            tracing::error!(error = format!("{e:#}"), "reading a policy file failed");
            Problem::internal()
        })?
        .map_err(file_problem)?
        .desired();
    let plan = if query.dry_run {
        state.control.plan_file(&actor, &file, query.prune).await
    } else {
        let plan_id = query.plan_id.as_deref();
        state
            .control
            .apply_file(&actor, &file, query.prune, plan_id)
            .await
    }
    .map_err(|e| match e {
        ApplyError::Forbidden(_) => Problem::forbidden(e.to_string()),
        ApplyError::Control(e) => e.into(),
    })?;
    Ok(HttpResponse::Ok().json(plan))
}

/// A body over the size cap.
fn too_large() -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too-large",
        "Payload too large",
        format!(
            "the policy file is over {} MiB, the most one file may have: split it by application",
            Caps::FILE.bytes / (1024 * 1024)
        ),
    )
}

/// The parser's errors, each field named by its document and line.
fn file_problem(errors: FileErrors) -> Problem {
    let fields = errors.0.into_iter().map(|e| {
        let line = e.line.map(|l| format!(", line {l}")).unwrap_or_default();
        FieldError::new(
            format!("document {}{line}: {}", e.document, e.field),
            e.message,
        )
    });
    Problem::invalid(FieldErrors(fields.collect()))
}
