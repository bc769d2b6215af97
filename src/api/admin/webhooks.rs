//! An application's webhooks: `POST`/`GET /apps/{slug}/webhooks`, `DELETE .../{id}`, the
//! secret's rotation and *Send again* of one delivery.

use actix_web::{HttpResponse, web};

use crate::api::auth::AdminActor;
use crate::api::json::ValidJson;
use crate::api::problem::Problem;
use crate::control::{CreatedWebhook, Reveal, WebhookInput, WebhookView};
use crate::state::AppState;

type Reply = Result<HttpResponse, Problem>;

#[utoipa::path(
    post, path = "/api/v1/apps/{slug}/webhooks", tag = "webhooks", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")), request_body = WebhookInput,
    responses(
        (status = 201, description = "Created; the only time the secret is shown", body = CreatedWebhook),
        (status = 400, description = "Malformed JSON body", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid input, each invalid field named; a receiver on a loopback or private address unless the operator allows them", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn create_webhook(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
    body: ValidJson<WebhookInput>,
) -> Reply {
    let created = state
        .control
        .create_webhook(&actor, &slug, &body.0, Reveal::InReply)
        .await?;
    Ok(HttpResponse::Created().json(created))
}

#[utoipa::path(
    get, path = "/api/v1/apps/{slug}/webhooks", tag = "webhooks", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$")),
    responses(
        (status = 200, description = "The application's webhooks, each with its latest deliveries and their attempts", body = Vec<WebhookView>),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application (or not one the caller may see)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn list_webhooks(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
) -> Reply {
    Ok(HttpResponse::Ok().json(state.control.list_webhooks(&actor, &slug).await?))
}

#[utoipa::path(
    delete, path = "/api/v1/apps/{slug}/webhooks/{id}", tag = "webhooks", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("id" = String, Path)),
    responses(
        (status = 204, description = "Deleted, with its deliveries"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application or webhook", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn delete_webhook(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
) -> Reply {
    let (slug, id) = path.into_inner();
    state.control.delete_webhook(&actor, &slug, &id).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(
    post, path = "/api/v1/apps/{slug}/webhooks/{id}/rotate-secret", tag = "webhooks", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("id" = String, Path)),
    responses(
        (status = 200, description = "The new secret, shown this once; the one before still signs for a day beside it", body = CreatedWebhook),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application or webhook", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn rotate_secret(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
) -> Reply {
    let (slug, id) = path.into_inner();
    let rotated = state
        .control
        .rotate_webhook_secret(&actor, &slug, &id, Reveal::InReply)
        .await?;
    Ok(HttpResponse::Ok().json(rotated))
}

#[utoipa::path(
    post, path = "/api/v1/apps/{slug}/webhooks/{id}/deliveries/{delivery}/send-again", tag = "webhooks", params(("slug" = String, Path, pattern = "^[a-z0-9][a-z0-9-]{1,62}$"), ("id" = String, Path), ("delivery" = String, Path)),
    responses(
        (status = 202, description = "The delivery is due again at once"),
        (status = 401, description = "No or bad access token", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not permitted", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such application, webhook or delivery", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("access_token" = []))
)]
pub async fn send_again(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String, String)>,
) -> Reply {
    let (slug, id, delivery) = path.into_inner();
    state
        .control
        .send_webhook_again(&actor, &slug, &id, &delivery)
        .await?;
    Ok(HttpResponse::Accepted().finish())
}
