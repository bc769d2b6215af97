use actix_web::{HttpResponse, web};

use super::AdminActor;
use crate::admin::{AppInput, KeyInput, MemberInput};
use crate::api::AppState;
use crate::api::json::ValidJson;
use crate::api::problem::Problem;

type Reply = Result<HttpResponse, Problem>;

pub async fn create_app(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    body: ValidJson<AppInput>,
) -> Reply {
    let app = state.admin.create_app(&actor, body.0).await?;
    Ok(HttpResponse::Created().json(app))
}

pub async fn list_apps(state: web::Data<AppState>, AdminActor(actor): AdminActor) -> Reply {
    Ok(HttpResponse::Ok().json(state.admin.list_apps(&actor).await?))
}

pub async fn get_app(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
) -> Reply {
    Ok(HttpResponse::Ok().json(state.admin.get_app(&actor, &slug).await?))
}

pub async fn create_key(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    slug: web::Path<String>,
    body: ValidJson<KeyInput>,
) -> Reply {
    let key = state.admin.create_key(&actor, &slug, body.0).await?;
    Ok(HttpResponse::Created().json(key))
}

pub async fn revoke_key(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
) -> Reply {
    let (slug, id) = path.into_inner();
    state.admin.revoke_key(&actor, &slug, &id).await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn set_member(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
    body: ValidJson<MemberInput>,
) -> Reply {
    let (slug, username) = path.into_inner();
    let member = state
        .admin
        .set_member(&actor, &slug, &username, body.0)
        .await?;
    Ok(HttpResponse::Ok().json(member))
}

pub async fn remove_member(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    path: web::Path<(String, String)>,
) -> Reply {
    let (slug, username) = path.into_inner();
    state.admin.remove_member(&actor, &slug, &username).await?;
    Ok(HttpResponse::NoContent().finish())
}
