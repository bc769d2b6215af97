//! The OpenAPI 3.1 document, generated from the handlers' own types.

use actix_web::HttpResponse;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use super::acquire;

#[derive(OpenApi)]
#[openapi(
    info(title = "ratekeeper", description = "Acquire API and admin JSON API"),
    paths(acquire::acquire),
    components(schemas(
        crate::admin::AppInput,
        crate::admin::KeyInput,
        crate::admin::MemberInput,
        crate::admin::PolicyInput,
        crate::admin::AppView,
        crate::admin::AppDetail,
        crate::admin::CreatedKey,
        crate::admin::PolicyView,
        crate::admin::AuditView,
        crate::limiter::BucketState,
    )),
    modifiers(&Security)
)]
struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer =
            || SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build());
        components.add_security_scheme("api_key", bearer());
        components.add_security_scheme("access_token", bearer());
    }
}

pub async fn document() -> HttpResponse {
    HttpResponse::Ok().json(ApiDoc::openapi())
}
