use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::AdminActor;
use crate::admin::PolicyInput;
use crate::api::AppState;
use crate::api::json::ValidJson;
use crate::api::problem::Problem;

type Reply = Result<HttpResponse, Problem>;

#[derive(Deserialize)]
pub struct ListQuery {
    app: Option<String>,
}

/// A policy name from the path; `%2F` stands for '/' when a client encodes it.
fn policy_name(path: &web::Path<String>) -> String {
    path.replace("%2F", "/").replace("%2f", "/")
}

pub async fn create_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    body: ValidJson<PolicyInput>,
) -> Reply {
    let policy = state.admin.create_policy(&actor, body.0).await?;
    Ok(HttpResponse::Created().json(policy))
}

pub async fn list_policies(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    query: web::Query<ListQuery>,
) -> Reply {
    let list = state
        .admin
        .list_policies(&actor, query.app.as_deref())
        .await?;
    Ok(HttpResponse::Ok().json(list))
}

pub async fn get_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
) -> Reply {
    Ok(HttpResponse::Ok().json(state.admin.get_policy(&actor, &policy_name(&name)).await?))
}

pub async fn update_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
    body: ValidJson<PolicyInput>,
) -> Reply {
    let policy = state
        .admin
        .update_policy(&actor, &policy_name(&name), body.0)
        .await?;
    Ok(HttpResponse::Ok().json(policy))
}

pub async fn delete_policy(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
) -> Reply {
    state
        .admin
        .delete_policy(&actor, &policy_name(&name))
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

pub async fn policy_state(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    name: web::Path<String>,
) -> Reply {
    Ok(HttpResponse::Ok().json(
        state
            .admin
            .policy_state(&actor, &policy_name(&name))
            .await?,
    ))
}
