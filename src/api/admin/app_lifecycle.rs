//! An application renamed or deleted, and a key rotated, over the admin API.

use actix_web::{HttpResponse, web};

use crate::api::auth::AdminActor;
use crate::api::json::ValidJson;
use crate::api::problem::Problem;
use crate::control::{AppInput, AppView, Reveal, RotateInput, RotatedKey};
use crate::state::AppState;

type Reply = Result<HttpResponse, Problem>;

#[utoipa::path(
    patch, path = "/api/v1/apps/{slug}", tag = "apps", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")), request_body = AppInput,
    description = "Changes any of slug, name and description (owners and admins). A new slug is \
        followed by everything that names the application: the policies it owns, its keys and \
        members, and other policies' allowed_apps and per_app overrides (those get a new version).",
    responses(
        (status = 200, description = "The application as it is now", body = AppView),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Another application has this slug", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn update_app(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
    body: ValidJson<AppInput>,
) -> Reply {
    let app = state.control.update_app(&actor, &slug, body.0).await?;
    Ok(HttpResponse::Ok().json(app))
}

#[utoipa::path(
    delete, path = "/api/v1/apps/{slug}", tag = "apps", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")),
    description = "Deletes the application with its keys and memberships (owners and admins); \
        refused while it owns policies.",
    responses(
        (status = 204, description = "Deleted; its keys stopped working"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "It owns policies, or is the only application a policy allows", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn delete_app(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
) -> Reply {
    state.control.delete_app(&actor, &slug).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    post, path = "/api/v1/apps/{slug}/keys/{id}/rotate", tag = "keys",
    params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("id" = String, Path, pattern = "^[0-9a-f]{16}$")), request_body = RotateInput,
    description = "A new key with the old one's label; the old one keeps working until \
        old_key_expires_at (24 hours by default, \"now\" allowed).",
    responses(
        (status = 201, description = "Created; the only time the new key is shown", body = RotatedKey),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application or live key", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The key has expired already", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn rotate_key(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
    body: ValidJson<RotateInput>,
) -> Reply {
    let (slug, id) = path.into_inner();
    let rotated = state
        .control
        .rotate_key(&actor, &slug, &id, body.0, Reveal::InReply)
        .await?;
    Ok(HttpResponse::Created().json(rotated))
}
