//! The sign-in as the console runs it, both legs: `begin` (a new request and the URL the
//! browser is sent to) and `finish` (the code the browser brings back redeemed, the ID
//! token's signature and claims checked). The provider's discovery document and keys are
//! read at the first sign-in and kept for [`PROVIDER_KEPT`]; a token signed with a key
//! they do not hold has them read again once (the provider rotated its keys).

use std::time::{Duration, Instant};

use secrecy::SecretString;
use tokio::sync::RwLock;
use url::Url;

use super::claims::{ClaimsRefused, IdClaims};
use super::discovery::{DiscoveryError, Provider, discover, provider_client};
use super::exchange::{Client, ExchangeError, redeem};
use super::keys::SignatureRefused;
use super::request::SignInRequest;

/// How long the provider's document and keys are used before they are read again.
const PROVIDER_KEPT: Duration = Duration::from_secs(600);

/// The provider and this server's registration with it.
#[derive(Debug, Clone)]
pub struct OidcSettings {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: SecretString,
    /// Members of this group (the ID token's `groups` claim) are admins; `None`: the
    /// provider decides nobody's role.
    pub admin_group: Option<String>,
}

/// Why a sign-in through the provider failed, in words for the page the person sees.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error("the identity provider could not be read: {0}")]
    Discovery(#[from] DiscoveryError),
    #[error("{0}")]
    Exchange(#[from] ExchangeError),
    #[error("the identity provider's token was refused: {0}")]
    Signature(#[from] SignatureRefused),
    #[error("the identity provider's token was refused: {0}")]
    Claims(#[from] ClaimsRefused),
}

pub struct OidcFlow {
    settings: OidcSettings,
    client: Client,
    http: reqwest::Client,
    provider: RwLock<Option<(Provider, Instant)>>,
}

impl OidcFlow {
    /// The flow for `settings`, the provider sending browsers back to `public_base`.
    pub fn new(settings: OidcSettings, public_base: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: Client {
                id: settings.client_id.clone(),
                secret: settings.client_secret.clone(),
                redirect_uri: format!("{public_base}/login/oidc/callback"),
            },
            settings,
            http: provider_client()?,
            provider: RwLock::new(None),
        })
    }

    pub fn settings(&self) -> &OidcSettings {
        &self.settings
    }

    /// The provider as last read, or read now when it is older than [`PROVIDER_KEPT`] or
    /// `again` is set.
    async fn provider(&self, again: bool) -> Result<Provider, FlowError> {
        if !again
            && let Some((provider, at)) = &*self.provider.read().await
            && at.elapsed() < PROVIDER_KEPT
        {
            return Ok(provider.clone());
        }
        let provider = discover(&self.http, &self.settings.issuer).await?;
        *self.provider.write().await = Some((provider.clone(), Instant::now()));
        Ok(provider)
    }

    /// A new sign-in, and where the browser goes to make it.
    pub async fn begin(&self) -> Result<(SignInRequest, Url), FlowError> {
        let provider = self.provider(false).await?;
        let request = SignInRequest::new();
        let url = request.authorization_url(
            &provider.authorization_endpoint,
            &self.client.id,
            &self.client.redirect_uri,
        );
        Ok((request, url))
    }

    /// The claims of the person the provider signed in, once `code` is redeemed with the
    /// sign-in's `verifier` and its ID token checked (signature, issuer, audience, time,
    /// `nonce`).
    pub async fn finish(
        &self,
        code: &str,
        nonce: &str,
        verifier: &SecretString,
    ) -> Result<IdClaims, FlowError> {
        let provider = self.provider(false).await?;
        let id_token = redeem(&self.http, &provider, &self.client, code, verifier).await?;
        let claims = match provider.keys.verify(&id_token) {
            Err(SignatureRefused::UnknownKey(_)) => {
                self.provider(true).await?.keys.verify(&id_token)?
            }
            verified => verified?,
        };
        let now_s = crate::store::now_ms() / 1000;
        claims.check(&provider.issuer, &self.client.id, nonce, now_s)?;
        Ok(claims)
    }
}
