//! What every HTTP handler may use, the APIs' and the console's alike: built once at
//! start (see `startup`) and shared by all workers. The acquire path has its own,
//! per worker: [`crate::acquire::Acquirer`].

use std::sync::Arc;

use crate::auth::LocalBuckets;
use crate::auth::oidc::flow::OidcFlow;
use crate::control::Control;
use crate::store::Store;
use crate::telemetry::Metrics;
use ratekeeper_limiter::Limiter;

pub struct AppState {
    pub control: Control,
    /// Redis, for readiness and ratekeeper's own limits (sign-in attempts).
    pub limiter: Limiter,
    /// SQL, for readiness.
    pub store: Store,
    /// This server's metrics, for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Turns for console requests (see `console::load_limit`), shared by every worker.
    pub console_load: Arc<tokio::sync::Semaphore>,
    /// Sign-in attempts counted in this process while Redis cannot be reached.
    pub sign_in_fallback: LocalBuckets,
    /// How people sign in to the console.
    pub sign_in: SignInMethods,
}

/// The console's ways in: a password, the OpenID Connect provider, or both.
pub struct SignInMethods {
    pub password: bool,
    pub oidc: Option<Arc<OidcFlow>>,
    /// The provider's name on its button.
    pub oidc_name: String,
}
