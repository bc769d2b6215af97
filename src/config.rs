//! Settings: built-in defaults, then an optional TOML file (`RATEKEEPER_CONFIG`), then
//! `RATEKEEPER_*` environment variables. Every later layer overrides the earlier one.

use std::time::Duration;

use figment::{
    Figment,
    providers::{Env, Format, Serialized, Toml},
};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

const ENV_PREFIX: &str = "RATEKEEPER_";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Address to serve on; port 0 picks a free port (logged at start).
    pub listen: String,
    /// Address of Envoy's rate limit service (gRPC, plaintext h2c); off when unset. Port 0
    /// picks a free port (logged at start).
    pub grpc_listen: Option<String>,
    /// `sqlite://...`, `postgres://...` or `mysql://...`.
    pub database_url: SecretString,
    /// One `redis://` URL, a comma-separated list of them for a Redis Cluster, or a
    /// `redis+sentinel://` URL for the master Redis Sentinel names.
    pub redis_url: SecretString,
    /// Prefix of every Redis key, so deployments and tests can share one Redis.
    pub redis_prefix: String,
    pub sync_interval_ms: u64,
    pub redis_timeout_ms: u64,
    /// Where a global token bucket's state lives in Redis: `packed` (its own key, read and
    /// written as one short string) or `hash` (left in its policy's hash while instances
    /// of a version before the state key still run on the same Redis; see the README's
    /// upgrade note).
    pub redis_state: RedisState,
    /// How a keyed token bucket's or GCRA bucket's expiry is set: `held` (ahead of what the
    /// bucket needs, recorded in its state) or `exact` (at every write, in the state
    /// versions before held expiries read, while such instances still run on the same
    /// Redis; see the README's upgrade note).
    pub keyed_expiry: KeyedExpiry,
    /// How long a request waits for a database connection before it answers 503.
    pub database_timeout_ms: u64,
    /// HTTP worker threads, and as many gRPC ones; defaults to the number of cores.
    pub workers: Option<usize>,
    /// Console requests worked on at once; defaults to half the cores (at least one).
    pub console_concurrency: Option<usize>,
    /// Log as JSON lines instead of human-readable text.
    pub log_json: bool,
    /// Webhooks may be sent to loopback and private addresses (tests, private networks);
    /// otherwise such a receiver is refused, as a guard against request forgery.
    pub webhook_allow_private: bool,
    /// The console's address as its users reach it (`https://ratekeeper.example.com`):
    /// events link to their policy's page under it. Defaults to `http://` and `listen`.
    pub public_url: Option<String>,
    /// The OpenID Connect provider people sign in with (its issuer URL); off when unset.
    /// With it, `oidc_client_id` and `oidc_client_secret` are required.
    pub oidc_issuer: Option<String>,
    pub oidc_client_id: Option<String>,
    pub oidc_client_secret: Option<SecretString>,
    /// Members of this group (the ID token's `groups` claim) sign in as admins.
    pub oidc_admin_group: Option<String>,
    /// The provider's name on the sign-in button ("Sign in with ...").
    pub oidc_name: String,
    /// Whether people may sign in with a password; `false` leaves the provider alone.
    pub password_sign_in: bool,
}

/// The defaults, as a serialisable mirror of [`Settings`] (secrets are plain here because
/// they are only defaults, never user input).
#[derive(Serialize)]
struct Defaults {
    listen: &'static str,
    database_url: &'static str,
    redis_url: &'static str,
    redis_prefix: &'static str,
    sync_interval_ms: u64,
    redis_timeout_ms: u64,
    redis_state: RedisState,
    keyed_expiry: KeyedExpiry,
    database_timeout_ms: u64,
    log_json: bool,
    webhook_allow_private: bool,
    oidc_name: &'static str,
    password_sign_in: bool,
}

/// Where a global token bucket's state is written (`crates/limiter/lua/lib/
/// token_bucket_global.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisState {
    /// Its own key beside the policy's hash; a state still in the hash moves there.
    Packed,
    /// Where it is: in the hash until an instance set to `packed` moves it.
    Hash,
}

/// How a keyed token bucket's or GCRA bucket's expiry is set (`keyed_store` in
/// `crates/limiter/lua/lib/keyed.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyedExpiry {
    /// Ahead of what the bucket needs, so that most writes leave it where it is.
    Held,
    /// At every write, to the instant the bucket is full again.
    Exact,
}

const DEFAULTS: Defaults = Defaults {
    listen: "127.0.0.1:8080",
    database_url: "sqlite://ratekeeper.db",
    redis_url: "redis://127.0.0.1:6379",
    redis_prefix: "ratekeeper",
    sync_interval_ms: 5000,
    redis_timeout_ms: 100,
    redis_state: RedisState::Packed,
    keyed_expiry: KeyedExpiry::Held,
    database_timeout_ms: 1000,
    log_json: false,
    webhook_allow_private: false,
    oidc_name: "single sign-on",
    password_sign_in: true,
};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    #[error("configuration: {field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

impl Settings {
    /// Layers defaults, the file named by `RATEKEEPER_CONFIG` (if any) and the environment.
    pub fn load() -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(DEFAULTS));
        if let Ok(path) = std::env::var("RATEKEEPER_CONFIG") {
            figment = figment.merge(Toml::file_exact(path));
        }
        // RATEKEEPER_SERVER, RATEKEEPER_TOKEN and RATEKEEPER_CA_FILE are the CLI's
        // `--server`, its access token and its CA, not settings.
        let cli_only = ["config", "server", "token", "ca_file"];
        let figment = figment.merge(Env::prefixed(ENV_PREFIX).ignore(&cli_only));
        let settings: Settings = figment.extract().map_err(Box::new)?;
        settings.validate()?;
        Ok(settings)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, message: &str| ConfigError::Invalid {
            field,
            message: message.to_owned(),
        };
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid("listen", "must be host:port, e.g. 127.0.0.1:8080"));
        }
        if let Some(grpc) = &self.grpc_listen
            && grpc.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(invalid(
                "grpc_listen",
                "must be host:port, e.g. 127.0.0.1:8081 (or unset: no gRPC)",
            ));
        }
        if self.sync_interval_ms < 100 {
            return Err(invalid("sync_interval_ms", "must be at least 100"));
        }
        if self.redis_timeout_ms == 0 {
            return Err(invalid("redis_timeout_ms", "must be at least 1"));
        }
        if self.database_timeout_ms == 0 {
            return Err(invalid("database_timeout_ms", "must be at least 1"));
        }
        if self.redis_prefix.is_empty() || self.redis_prefix.contains(['{', '}', ' ']) {
            return Err(invalid(
                "redis_prefix",
                "must be non-empty without braces or spaces",
            ));
        }
        if self.workers == Some(0) {
            return Err(invalid("workers", "must be at least 1"));
        }
        if self.console_concurrency == Some(0) {
            return Err(invalid("console_concurrency", "must be at least 1"));
        }
        let oidc = [
            self.oidc_issuer.is_some(),
            self.oidc_client_id.is_some(),
            self.oidc_client_secret.is_some(),
        ];
        if oidc.contains(&true) && oidc.contains(&false) {
            return Err(invalid(
                "oidc_issuer",
                "oidc_issuer, oidc_client_id and oidc_client_secret go together: set all three",
            ));
        }
        if let Some(issuer) = &self.oidc_issuer
            && !url::Url::parse(issuer).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
        {
            return Err(invalid(
                "oidc_issuer",
                "must be the provider's issuer URL, e.g. https://id.example.com",
            ));
        }
        if self.oidc_issuer.is_some() && self.public_url.is_none() && self.listens_everywhere() {
            return Err(invalid(
                "public_url",
                "is required with an OpenID Connect provider when listen is 0.0.0.0 or [::]: \
                 the provider sends browsers back to <public_url>/login/oidc/callback",
            ));
        }
        if !self.password_sign_in && self.oidc_issuer.is_none() {
            return Err(invalid(
                "password_sign_in",
                "may be false only with an OpenID Connect provider (oidc_issuer): else nobody could sign in",
            ));
        }
        if let Some(public) = &self.public_url
            && !url::Url::parse(public)
                .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        {
            return Err(invalid(
                "public_url",
                "must be an http or https URL, e.g. https://ratekeeper.example.com",
            ));
        }
        Ok(())
    }

    /// Whether `listen` is every address (0.0.0.0 or [::]), which no browser can reach by.
    pub fn listens_everywhere(&self) -> bool {
        self.listen
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| a.ip().is_unspecified())
    }

    /// The console's address as users reach it, without a trailing slash; `port` is the
    /// one bound, for the default made of `listen`.
    pub fn public_base(&self, port: u16) -> String {
        match &self.public_url {
            Some(public) => public.trim_end_matches('/').to_owned(),
            None => {
                let host = self.listen.rsplit_once(':').map_or("127.0.0.1", |(h, _)| h);
                format!("http://{host}:{port}")
            }
        }
    }

    /// The OpenID Connect provider's settings, when one is configured.
    pub fn oidc(&self) -> Option<crate::auth::oidc::flow::OidcSettings> {
        Some(crate::auth::oidc::flow::OidcSettings {
            issuer: self.oidc_issuer.clone()?,
            client_id: self.oidc_client_id.clone()?,
            client_secret: self.oidc_client_secret.clone()?,
            admin_group: self.oidc_admin_group.clone(),
        })
    }

    pub fn sync_interval(&self) -> Duration {
        Duration::from_millis(self.sync_interval_ms)
    }

    pub fn redis_timeout(&self) -> Duration {
        Duration::from_millis(self.redis_timeout_ms)
    }

    pub fn database_timeout(&self) -> Duration {
        Duration::from_millis(self.database_timeout_ms)
    }

    /// Console requests worked on at once (`console::load_limit`).
    pub fn console_concurrency(&self) -> usize {
        self.console_concurrency.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
        })
    }
}
