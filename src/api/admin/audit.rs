use actix_web::{HttpResponse, web};
use serde::Deserialize;

use super::AdminActor;
use crate::api::AppState;
use crate::api::problem::Problem;
use crate::store::AuditFilter;

#[derive(Deserialize)]
pub struct AuditQuery {
    app: Option<String>,
    user: Option<String>,
    policy: Option<String>,
    page: Option<u32>,
}

pub async fn list_audit(
    state: web::Data<AppState>,
    AdminActor(actor): AdminActor,
    query: web::Query<AuditQuery>,
) -> Result<HttpResponse, Problem> {
    let q = query.into_inner();
    let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let filter = AuditFilter {
        app: nonempty(q.app),
        user: nonempty(q.user),
        policy: nonempty(q.policy),
        visible_apps: None,
        page: q.page.unwrap_or(1).max(1),
        per_page: 0,
    };
    Ok(HttpResponse::Ok().json(state.admin.list_audit(&actor, filter).await?))
}
