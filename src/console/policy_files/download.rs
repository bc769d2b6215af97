//! `GET /apps/{slug}/policies.yaml`: an application's policies as a policy file, the
//! same YAML as `GET /api/v1/export?app={slug}`, for anyone who may view the application.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::console::error::ConsoleError;
use crate::console::session::SignedIn;
use crate::policy_file;
use crate::state::AppState;

pub async fn download(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    // Refused (403, 404) unless the actor may view the application; past this the slug
    // is a real application's, safe in a header.
    let policies = state
        .control
        .list_policies(&signed_in.actor, Some(&slug))
        .await?;
    let yaml = policy_file::to_yaml(&policies)
        .map_err(|e| anyhow::anyhow!("cannot write the policies as YAML: {e}"))?;
    Ok(HttpResponse::Ok()
        .content_type("application/yaml")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{slug}-policies.yaml\""),
        ))
        // The policies as they are now: never a copy kept from before an edit.
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(yaml))
}
