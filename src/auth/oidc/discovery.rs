//! The provider as its discovery document describes it (OpenID Connect Discovery 1.0):
//! read once from `<issuer>/.well-known/openid-configuration`, with its keys from the
//! document's `jwks_uri`. The document must name the configured issuer exactly (else
//! another party could pass for it), offer the authorization code flow and, if it lists
//! its PKCE methods, S256; its endpoints must use https unless the issuer itself is a
//! plain-http one (a provider on the same machine, as in tests).

use serde::Deserialize;
use url::Url;

use super::keys::ProviderKeys;

/// What a sign-in needs of the provider.
#[derive(Debug, Clone)]
pub struct Provider {
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    /// Where a sign-out may send the browser, when the provider has one.
    pub end_session_endpoint: Option<Url>,
    pub keys: ProviderKeys,
}

#[derive(Deserialize)]
struct Document {
    issuer: String,
    authorization_endpoint: Url,
    token_endpoint: Url,
    jwks_uri: Url,
    #[serde(default)]
    end_session_endpoint: Option<Url>,
    #[serde(default)]
    response_types_supported: Vec<String>,
    #[serde(default)]
    code_challenge_methods_supported: Option<Vec<String>>,
}

/// Why a provider cannot be used, naming what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("the issuer {0:?} is not an http(s) URL")]
    Issuer(String),
    #[error("reading {url}: {why}")]
    Fetch { url: String, why: String },
    #[error("{url} is not a discovery document or key set: {why}")]
    Document { url: String, why: String },
    #[error("the discovery document names the issuer {got:?}, not {expected:?}")]
    IssuerMismatch { expected: String, got: String },
    #[error("the provider does not offer {0}")]
    Unsupported(&'static str),
    #[error("the provider's {0} is not https")]
    Insecure(&'static str),
}

/// How long a request to the provider may take.
const PROVIDER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The HTTP client the server talks to providers with. reqwest is built without a crypto
/// provider of its own (`rustls-no-provider`): ring, the one the rest of the server uses,
/// is installed for the process first (a second install is harmless: the first stays).
pub fn provider_client() -> reqwest::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(PROVIDER_TIMEOUT).build()
}

/// The provider at `issuer`, read through `http`.
pub async fn discover(http: &reqwest::Client, issuer: &str) -> Result<Provider, DiscoveryError> {
    let base = Url::parse(issuer)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| DiscoveryError::Issuer(issuer.to_owned()))?;
    let at = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let document: Document =
        serde_json::from_slice(&fetch(http, &at).await?).map_err(|e| DiscoveryError::Document {
            url: at.clone(),
            why: e.to_string(),
        })?;
    if document.issuer != issuer {
        return Err(DiscoveryError::IssuerMismatch {
            expected: issuer.to_owned(),
            got: document.issuer,
        });
    }
    if !document
        .response_types_supported
        .iter()
        .any(|r| r == "code")
    {
        return Err(DiscoveryError::Unsupported("the authorization code flow"));
    }
    if let Some(methods) = &document.code_challenge_methods_supported
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(DiscoveryError::Unsupported("PKCE with S256"));
    }
    let plain_allowed = base.scheme() == "http";
    for (what, url) in [
        ("authorization endpoint", &document.authorization_endpoint),
        ("token endpoint", &document.token_endpoint),
        ("key set (jwks_uri)", &document.jwks_uri),
    ] {
        if url.scheme() != "https" && !(plain_allowed && url.scheme() == "http") {
            return Err(DiscoveryError::Insecure(what));
        }
    }
    let keys_at = document.jwks_uri.to_string();
    let keys = ProviderKeys::from_json(&fetch(http, &keys_at).await?).map_err(|e| {
        DiscoveryError::Document {
            url: keys_at,
            why: e.to_string(),
        }
    })?;
    Ok(Provider {
        issuer: document.issuer,
        authorization_endpoint: document.authorization_endpoint,
        token_endpoint: document.token_endpoint,
        end_session_endpoint: document.end_session_endpoint,
        keys,
    })
}

async fn fetch(http: &reqwest::Client, url: &str) -> Result<Vec<u8>, DiscoveryError> {
    let failed = |why: String| DiscoveryError::Fetch {
        url: url.to_owned(),
        why,
    };
    let response = http
        .get(url)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("status {}", response.status())));
    }
    Ok(response
        .bytes()
        .await
        .map_err(|e| failed(e.to_string()))?
        .to_vec())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use actix_web::{App, HttpResponse, HttpServer, web};
    use serde_json::{Value, json};

    use super::*;

    /// A provider on a local port serving `document` (its `{base}` replaced by its own
    /// address) and an empty key set.
    async fn provider(document: Value) -> String {
        let shared = Arc::new(Mutex::new(String::new()));
        let served = shared.clone();
        let server = HttpServer::new(move || {
            let served = served.clone();
            App::new()
                .route(
                    "/.well-known/openid-configuration",
                    web::get().to(move || {
                        let body = served.lock().unwrap().clone();
                        async move {
                            HttpResponse::Ok()
                                .content_type("application/json")
                                .body(body)
                        }
                    }),
                )
                .route(
                    "/jwks",
                    web::get().to(|| async { HttpResponse::Ok().json(json!({"keys": []})) }),
                )
        })
        .workers(1)
        .bind(("127.0.0.1", 0))
        .unwrap();
        let base = format!("http://{}", server.addrs()[0]);
        *shared.lock().unwrap() = document.to_string().replace("{base}", &base);
        tokio::spawn(server.run());
        base
    }

    fn document() -> Value {
        json!({
            "issuer": "{base}",
            "authorization_endpoint": "{base}/auth",
            "token_endpoint": "{base}/token",
            "jwks_uri": "{base}/jwks",
            "end_session_endpoint": "{base}/session/end",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        })
    }

    #[actix_web::test]
    async fn a_provider_is_read_from_its_discovery_document() {
        let base = provider(document()).await;
        let found = discover(&provider_client().unwrap(), &base).await.unwrap();
        assert_eq!(found.issuer, base);
        assert_eq!(found.token_endpoint.as_str(), format!("{base}/token"));
        assert_eq!(
            found.end_session_endpoint.map(String::from),
            Some(format!("{base}/session/end"))
        );
    }

    #[actix_web::test]
    async fn a_provider_that_cannot_be_trusted_or_used_is_refused_saying_why() {
        let http = provider_client().unwrap();
        let cases = [
            ("issuer", json!("https://someone-else.example.com"), "not"),
            (
                "response_types_supported",
                json!(["id_token"]),
                "authorization code",
            ),
            ("code_challenge_methods_supported", json!(["plain"]), "S256"),
            (
                "token_endpoint",
                json!("ftp://{base}/token"),
                "token endpoint",
            ),
        ];
        for (field, value, says) in cases {
            let mut doc = document();
            doc[field] = value;
            let base = provider(doc).await;
            let refused = discover(&http, &base).await.unwrap_err();
            assert!(refused.to_string().contains(says), "{field}: {refused}");
        }
        let base = provider(document()).await;
        let refused = discover(&http, &format!("{base}/other")).await.unwrap_err();
        assert!(matches!(refused, DiscoveryError::Fetch { .. }), "{refused}");
        assert!(matches!(
            discover(&http, "ldap://id.example.com").await.unwrap_err(),
            DiscoveryError::Issuer(_)
        ));
    }
}
