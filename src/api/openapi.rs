//! The OpenAPI 3.1 document, generated from the handlers' own types.

use actix_web::HttpResponse;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use super::openapi_creates::Creates;
use super::{acquire, admin, refund, release};

#[derive(OpenApi)]
#[openapi(
    info(title = "ratekeeper", description = "Acquire API and admin JSON API"),
    paths(
        acquire::acquire,
        release::release,
        refund::refund,
        admin::apps::create_app,
        admin::apps::list_apps,
        admin::apps::get_app,
        admin::app_lifecycle::update_app,
        admin::app_lifecycle::delete_app,
        admin::app_lifecycle::rotate_key,
        admin::apps::create_key,
        admin::apps::revoke_key,
        admin::apps::set_member,
        admin::apps::remove_member,
        admin::webhooks::create_webhook,
        admin::webhooks::list_webhooks,
        admin::webhooks::delete_webhook,
        admin::webhooks::rotate_secret,
        admin::webhooks::send_again,
        admin::policies::create_policy,
        admin::policies::list_policies,
        admin::policies::get_policy,
        admin::policies::update_policy,
        admin::policies::delete_policy,
        admin::policies::policy_state,
        admin::policies::reset_bucket,
        admin::policies::top_callers,
        admin::policies::policy_versions,
        admin::policies::rollback_policy,
        admin::audit::list_audit,
        admin::export::export,
        admin::export::schema,
        admin::apply::apply,
    ),
    components(schemas(
        crate::control::AppInput,
        crate::control::KeyInput,
        crate::control::RotateInput,
        crate::control::RotatedKey,
        crate::control::ApiKeyView,
        crate::control::MemberInput,
        crate::control::PolicyInput,
        crate::control::AppView,
        crate::control::AppDetail,
        crate::control::CreatedKey,
        crate::control::PolicyView,
        crate::control::PolicyVersionView,
        crate::control::RollbackInput,
        crate::control::AuditView,
        ratekeeper_limiter::BucketState,
        ratekeeper_limiter::CallerCount,
        crate::control::TopCallers,
        crate::control::OverrideView,
        crate::control::OverrideInput,
        crate::control::DescriptorView,
        crate::control::DescriptorInput,
        crate::control::MemberView,
        crate::control::Plan,
        crate::control::PlannedPolicy,
        crate::control::PlanAction,
        crate::control::FieldChange,
        crate::control::WebhookInput,
        crate::domain::WebhookEvent,
        crate::control::WebhookView,
        crate::control::CreatedWebhook,
        crate::control::DeliveryView,
        crate::control::AttemptView,
        super::problem::Problem,
    )),
    modifiers(&Security, &Creates)
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
