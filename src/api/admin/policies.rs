use actix_web::{HttpResponse, web};
use serde::Deserialize;

use crate::api::auth::AdminActor;
use crate::control::{PolicyInput, PolicyVersionView, PolicyView, RollbackInput, TopCallers};
use ratekeeper_limiter::BucketState;

use crate::api::json::ValidJson;
use crate::api::problem::Problem;
use crate::api::query::TextQuery;
use crate::domain::FieldError;
use crate::state::AppState;

type Reply = Result<HttpResponse, Problem>;

#[derive(Deserialize)]
pub struct ListQuery {
    pub(super) app: Option<String>,
}

/// A policy name from the path; `%2F` stands for '/' when a client encodes it.
fn policy_name(path: &web::Path<String>) -> String {
    path.replace("%2F", "/").replace("%2f", "/")
}

#[utoipa::path(
    post, path = "/api/v1/policies", tag = "policies", request_body = PolicyInput,
    responses(
        (status = 201, description = "Created", body = PolicyView),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A policy with this name exists", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn create_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    body: ValidJson<PolicyInput>,
) -> Reply {
    let policy = state.control.create_policy(&actor, body.0).await?;
    Ok(HttpResponse::Created().json(policy))
}

#[utoipa::path(
    get, path = "/api/v1/policies", tag = "policies", params(("app" = Option<String>, Query, pattern = "^[a-z0-9][a-z0-9-]{1,62}$", description = "an application slug")),
    responses(
        (status = 200, description = "The policies of the application, or of every application the caller may see", body = Vec<PolicyView>),
        (status = 400, description = "Malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn list_policies(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    query: TextQuery<ListQuery>,
) -> Reply {
    let list = state
        .control
        .list_policies(&actor, query.app.as_deref())
        .await?;
    Ok(HttpResponse::Ok().json(list))
}

#[utoipa::path(
    get, path = "/api/v1/policies/{name}", tag = "policies", params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")),
    responses(
        (status = 200, description = "The policy", body = PolicyView),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn get_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
) -> Reply {
    Ok(HttpResponse::Ok().json(
        state
            .control
            .get_policy(&actor, &policy_name(&name))
            .await?,
    ))
}

#[utoipa::path(
    patch, path = "/api/v1/policies/{name}", tag = "policies", params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")), request_body = PolicyInput,
    responses(
        (status = 200, description = "The policy as it is now", body = PolicyView),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The version sent is not the policy's current one (see current_version)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn update_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
    body: ValidJson<PolicyInput>,
) -> Reply {
    let policy = state
        .control
        .update_policy(&actor, &policy_name(&name), body.0)
        .await?;
    Ok(HttpResponse::Ok().json(policy))
}

#[utoipa::path(
    delete, path = "/api/v1/policies/{name}", tag = "policies", params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn delete_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
) -> Reply {
    state
        .control
        .delete_policy(&actor, &policy_name(&name))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize)]
pub struct StateQuery {
    key: Option<String>,
}

#[utoipa::path(
    get, path = "/api/v1/policies/{name}/state", tag = "policies",
    params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"), ("key" = Option<String>, Query, min_length = 1, max_length = 64, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", description = "a keyed policy's caller: the key (per_key) or the app slug (per_app); required there, refused on a global policy")),
    responses(
        (status = 200, description = "The live state in Redis: the policy's bucket, or one caller's", body = BucketState),
        (status = 400, description = "Malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy, or no state in Redis yet", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "key missing on a keyed policy, given on a global one, or invalid", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Redis or the database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn policy_state(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
    query: TextQuery<StateQuery>,
) -> Reply {
    Ok(HttpResponse::Ok().json(
        state
            .control
            .policy_state(&actor, &policy_name(&name), query.key.as_deref())
            .await?,
    ))
}

#[utoipa::path(
    delete, path = "/api/v1/policies/{name}/state", tag = "policies",
    params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"), ("key" = String, Query, min_length = 1, max_length = 64, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$", description = "the caller whose bucket starts afresh: the key (per_key) or the app slug (per_app)")),
    responses(
        (status = 204, description = "The caller's bucket is reset: full at its next acquire"),
        (status = 400, description = "Malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted (owners and admins only)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "key missing, invalid, or the policy is global", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Redis or the database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn reset_bucket(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
    query: TextQuery<StateQuery>,
) -> Reply {
    let Some(key) = query.key.as_deref() else {
        return Err(Problem::invalid(
            FieldError::new("key", "is required: the caller whose bucket to reset").into(),
        ));
    };
    state
        .control
        .reset_bucket(&actor, &policy_name(&name), key)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Deserialize)]
pub struct TopQuery {
    minutes: Option<i64>,
}

#[utoipa::path(
    get, path = "/api/v1/policies/{name}/top", tag = "policies",
    params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"), ("minutes" = Option<i64>, Query, minimum = 1, maximum = 60, description = "1 to 60, default 5")),
    responses(
        (status = 200, description = "The top 10 callers (keys, or apps) by grants and by denials", body = TopCallers),
        (status = 400, description = "Malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "minutes out of range", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Redis or the database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn top_callers(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
    query: TextQuery<TopQuery>,
) -> Reply {
    Ok(HttpResponse::Ok().json(
        state
            .control
            .top_callers(&actor, &policy_name(&name), query.minutes.unwrap_or(5))
            .await?,
    ))
}

#[derive(Deserialize)]
pub struct VersionsQuery {
    before: Option<i64>,
}

#[utoipa::path(
    get, path = "/api/v1/policies/{name}/versions", tag = "policies",
    params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"), ("before" = Option<i64>, Query, minimum = 1, description = "only versions older than this one (the next page)")),
    responses(
        (status = 200, description = "The policy's saved versions, newest first, 50 at most", body = Vec<PolicyVersionView>),
        (status = 400, description = "Malformed query string", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn policy_versions(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
    query: TextQuery<VersionsQuery>,
) -> Reply {
    let history = state
        .control
        .policy_history(&actor, &policy_name(&name), query.before)
        .await?;
    Ok(HttpResponse::Ok().json(history.versions))
}

#[utoipa::path(
    post, path = "/api/v1/policies/{name}/rollback", tag = "policies", params(("name" = String, Path, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")), request_body = RollbackInput,
    responses(
        (status = 200, description = "The policy as it is now: a new version equal to the one restored", body = PolicyView),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The version sent is not the policy's current one (see current_version)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "to_version or version missing, or no such saved version", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn rollback_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
    body: ValidJson<RollbackInput>,
) -> Reply {
    let policy = state
        .control
        .rollback_policy(&actor, &policy_name(&name), body.0)
        .await?;
    Ok(HttpResponse::Ok().json(policy))
}
