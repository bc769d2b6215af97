use actix_web::{HttpResponse, web};

use crate::api::auth::AdminActor;
use crate::control::{
    AppDetail, AppInput, AppView, CreatedKey, KeyInput, MemberInput, MemberView, Ownerless, Reveal,
};

use crate::api::json::ValidJson;
use crate::api::problem::Problem;
use crate::state::AppState;

type Reply = Result<HttpResponse, Problem>;

#[utoipa::path(
    post, path = "/api/v1/apps", tag = "apps", request_body = AppInput,
    responses(
        (status = 201, description = "Created", body = AppView),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "An application with this slug exists", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn create_app(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    body: ValidJson<AppInput>,
) -> Reply {
    let app = state.control.create_app(&actor, body.0).await?;
    Ok(HttpResponse::Created().json(app))
}

#[utoipa::path(
    get, path = "/api/v1/apps", tag = "apps",
    responses(
        (status = 200, description = "The applications the caller may see", body = Vec<AppView>),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn list_apps(state: web::Data<AppState>, AdminActor(actor): AdminActor) -> Reply {
    Ok(HttpResponse::Ok().json(state.control.list_apps(&actor).await?))
}

#[utoipa::path(
    get, path = "/api/v1/apps/{slug}", tag = "apps", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")),
    responses(
        (status = 200, description = "The application, its members and keys", body = AppDetail),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn get_app(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
) -> Reply {
    Ok(HttpResponse::Ok().json(state.control.get_app(&actor, &slug).await?))
}

#[utoipa::path(
    post, path = "/api/v1/apps/{slug}/keys", tag = "keys", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")), request_body = KeyInput,
    responses(
        (status = 201, description = "Created; the only time the key is shown", body = CreatedKey),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn create_key(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
    body: ValidJson<KeyInput>,
) -> Reply {
    let key = state
        .control
        .create_key(&actor, &slug, body.0, Reveal::InReply)
        .await?;
    Ok(HttpResponse::Created().json(key))
}

#[utoipa::path(
    delete, path = "/api/v1/apps/{slug}/keys/{id}", tag = "keys", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("id" = String, Path, pattern = "^[0-9a-f]{16}$")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application or key", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn revoke_key(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
) -> Reply {
    let (slug, id) = path.into_inner();
    state.control.revoke_key(&actor, &slug, &id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    put, path = "/api/v1/apps/{slug}/members/{username}", tag = "members", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("username" = String, Path, pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")), request_body = MemberInput,
    responses(
        (status = 200, description = "The membership as it is now", body = MemberView),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "It would leave the application without an owner (refused unless the caller is an admin)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application or user", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn set_member(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
    body: ValidJson<MemberInput>,
) -> Reply {
    let (slug, username) = path.into_inner();
    let member = state
        .control
        .set_member(&actor, &slug, &username, body.0, Ownerless::AdminConfirmed)
        .await?;
    Ok(HttpResponse::Ok().json(member))
}

#[utoipa::path(
    delete, path = "/api/v1/apps/{slug}/members/{username}", tag = "members", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("username" = String, Path, pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")),
    responses(
        (status = 204, description = "Removed"),
        (status = 409, description = "It would leave the application without an owner (refused unless the caller is an admin)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application or member", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn remove_member(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
) -> Reply {
    let (slug, username) = path.into_inner();
    state
        .control
        .remove_member(&actor, &slug, &username, Ownerless::AdminConfirmed)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
