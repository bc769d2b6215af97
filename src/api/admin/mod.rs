//! The admin JSON API under `/api/v1`, authenticated by personal access tokens. Each
//! handler parses, calls [`crate::control::Control`] (which authorises and audits), and
//! renders.

pub(super) mod app_lifecycle;
pub(super) mod apply;
pub(super) mod apps;
pub(super) mod audit;
pub(super) mod export;
pub(super) mod policies;
pub(super) mod webhooks;

use actix_web::middleware::Compress;
use actix_web::{guard, web};

use super::resource;
use tracing_actix_web::TracingLogger;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/v1")
            // A span per admin request, with its route pattern. Not on the acquire path:
            // measured there it cost 40% of the throughput; metrics cover acquires.
            .wrap(TracingLogger::default())
            // Lists of policies and audit events compress well; acquires (outside this
            // scope) are never compressed: their replies are tiny and on the hot path.
            .wrap(Compress::default())
            .service(
                resource("/apps", "GET, POST")
                    .route(web::post().to(apps::create_app))
                    .route(web::get().to(apps::list_apps)),
            )
            .service(
                resource("/apps/{slug}", "GET, PATCH, DELETE")
                    .route(web::get().to(apps::get_app))
                    .route(web::patch().to(app_lifecycle::update_app))
                    .route(web::delete().to(app_lifecycle::delete_app)),
            )
            .service(resource("/apps/{slug}/keys", "POST").route(web::post().to(apps::create_key)))
            .service(
                resource("/apps/{slug}/keys/{id}", "DELETE")
                    .route(web::delete().to(apps::revoke_key)),
            )
            .service(
                resource("/apps/{slug}/keys/{id}/rotate", "POST")
                    .route(web::post().to(app_lifecycle::rotate_key)),
            )
            .service(
                resource("/apps/{slug}/webhooks", "GET, POST")
                    .route(web::post().to(webhooks::create_webhook))
                    .route(web::get().to(webhooks::list_webhooks)),
            )
            .service(
                resource("/apps/{slug}/webhooks/{id}", "DELETE")
                    .route(web::delete().to(webhooks::delete_webhook)),
            )
            .service(
                resource("/apps/{slug}/webhooks/{id}/rotate-secret", "POST")
                    .route(web::post().to(webhooks::rotate_secret)),
            )
            .service(
                resource(
                    "/apps/{slug}/webhooks/{id}/deliveries/{delivery}/send-again",
                    "POST",
                )
                .route(web::post().to(webhooks::send_again)),
            )
            .service(
                resource("/apps/{slug}/members/{username}", "PUT, DELETE")
                    .route(web::put().to(apps::set_member))
                    .route(web::delete().to(apps::remove_member)),
            )
            .service(
                resource("/policies", "GET, POST")
                    .route(web::post().to(policies::create_policy))
                    .route(web::get().to(policies::list_policies)),
            )
            .service(resource("/export", "GET").route(web::get().to(export::export)))
            .service(
                resource("/apply", "POST")
                    .app_data(web::PayloadConfig::new(
                        crate::policy_file::Caps::FILE.bytes,
                    ))
                    .route(web::post().to(apply::apply)),
            )
            // Policy names may contain '/': the top, state, versions and rollback resources
            // are matched first, and a name ending in one of those words is reached
            // percent-encoded (%2F).
            .service(
                resource("/policies/{name:.+}/top", "GET")
                    .route(web::get().to(policies::top_callers)),
            )
            .service(
                resource("/policies/{name:.+}/state", "GET, DELETE")
                    .route(web::get().to(policies::policy_state))
                    .route(web::delete().to(policies::reset_bucket)),
            )
            .service(
                resource("/policies/{name:.+}/versions", "GET")
                    .route(web::get().to(policies::policy_versions)),
            )
            .service(
                resource("/policies/{name:.+}/rollback", "POST")
                    .route(web::post().to(policies::rollback_policy)),
            )
            .service(
                resource("/policies/{name:.+}", "GET, PATCH, DELETE")
                    // The file format's schema, public; it hides GET of a policy named
                    // "schema.json" only (its other methods still reach the policy).
                    .route(
                        web::get()
                            .guard(guard::fn_guard(|ctx| {
                                ctx.head().uri.path() == export::SCHEMA_PATH
                            }))
                            .to(export::schema),
                    )
                    .route(web::get().to(policies::get_policy))
                    .route(web::patch().to(policies::update_policy))
                    .route(web::delete().to(policies::delete_policy)),
            )
            .service(resource("/audit", "GET").route(web::get().to(audit::list_audit))),
    );
}
