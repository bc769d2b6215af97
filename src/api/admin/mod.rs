//! The admin JSON API under `/api/v1`, authenticated by personal access tokens. Each
//! handler parses, calls [`crate::control::Control`] (which authorises and audits), and
//! renders.

pub(super) mod apps;
pub(super) mod audit;
pub(super) mod policies;

use actix_web::web;
use tracing_actix_web::TracingLogger;

pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/api/v1")
            // A span per admin request, with its route pattern. Not on the acquire path:
            // measured there it cost 40% of the throughput; metrics cover acquires.
            .wrap(TracingLogger::default())
            .route("/apps", web::post().to(apps::create_app))
            .route("/apps", web::get().to(apps::list_apps))
            .route("/apps/{slug}", web::get().to(apps::get_app))
            .route("/apps/{slug}/keys", web::post().to(apps::create_key))
            .route("/apps/{slug}/keys/{id}", web::delete().to(apps::revoke_key))
            .route(
                "/apps/{slug}/members/{username}",
                web::put().to(apps::set_member),
            )
            .route(
                "/apps/{slug}/members/{username}",
                web::delete().to(apps::remove_member),
            )
            .route("/policies", web::post().to(policies::create_policy))
            .route("/policies", web::get().to(policies::list_policies))
            // Policy names may contain '/': the state route is matched first, and a name
            // ending in "/state" can be reached percent-encoded (%2F).
            .route(
                "/policies/{name:.+}/state",
                web::get().to(policies::policy_state),
            )
            .route("/policies/{name:.+}", web::get().to(policies::get_policy))
            .route(
                "/policies/{name:.+}",
                web::patch().to(policies::update_policy),
            )
            .route(
                "/policies/{name:.+}",
                web::delete().to(policies::delete_policy),
            )
            .route("/audit", web::get().to(audit::list_audit)),
    );
}
