//! The second leg of a sign-in: the code the provider sent the browser back with,
//! redeemed at its token endpoint for an ID token (the client authenticated with its
//! secret, HTTP Basic as the specification's default; the PKCE verifier proving that this
//! server began the sign-in). The ID token is then verified (`keys`) and its claims
//! checked (`claims`) by the caller.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::discovery::Provider;

/// This server as the provider knows it.
pub struct Client {
    pub id: String,
    pub secret: SecretString,
    /// The callback URL registered with the provider.
    pub redirect_uri: String,
}

#[derive(Deserialize)]
struct TokenReply {
    id_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorReply {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// Why a code could not be redeemed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("the provider could not be reached: {0}")]
    Unreachable(String),
    #[error("the provider refused the code: {error}{}", .description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Refused {
        error: String,
        description: Option<String>,
    },
    #[error("the provider's reply holds no ID token")]
    NoIdToken,
}

/// The ID token the provider gives for `code`, redeemed with the sign-in's `verifier`.
pub async fn redeem(
    http: &reqwest::Client,
    provider: &Provider,
    client: &Client,
    code: &str,
    verifier: &SecretString,
) -> Result<String, ExchangeError> {
    // RFC 6749, 2.3.1: the id and secret form-encoded, then joined for Basic.
    let encode = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let basic = STANDARD.encode(format!(
        "{}:{}",
        encode(&client.id),
        encode(client.secret.expose_secret())
    ));
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", code)
        .append_pair("redirect_uri", &client.redirect_uri)
        .append_pair("code_verifier", verifier.expose_secret())
        .finish();
    let response = http
        .post(provider.token_endpoint.clone())
        .header("authorization", format!("Basic {basic}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| ExchangeError::Unreachable(e.to_string()))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| ExchangeError::Unreachable(e.to_string()))?;
    if !status.is_success() {
        return Err(match serde_json::from_slice::<ErrorReply>(&bytes) {
            Ok(e) => ExchangeError::Refused {
                error: e.error,
                description: e.error_description,
            },
            Err(_) => ExchangeError::Refused {
                error: format!("status {status}"),
                description: None,
            },
        });
    }
    serde_json::from_slice::<TokenReply>(&bytes)
        .ok()
        .and_then(|r| r.id_token)
        .ok_or(ExchangeError::NoIdToken)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
    use serde_json::json;

    use super::super::discovery::provider_client;
    use super::super::keys::ProviderKeys;
    use super::*;

    /// A token endpoint on a local port that records each request (its Authorization
    /// header and body) and answers the code "good" with an ID token.
    async fn token_endpoint() -> (Provider, Arc<Mutex<Vec<(String, String)>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let server = HttpServer::new(move || {
            let recorded = recorded.clone();
            App::new().route(
                "/token",
                web::post().to(move |req: HttpRequest, body: String| {
                    let recorded = recorded.clone();
                    async move {
                        let auth = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        let good = body.contains("code=good&");
                        recorded.lock().unwrap().push((auth, body));
                        if good {
                            HttpResponse::Ok().json(json!({"id_token": "h.p.s", "token_type": "Bearer"}))
                        } else {
                            HttpResponse::BadRequest().json(
                                json!({"error": "invalid_grant", "error_description": "grant request is invalid"}),
                            )
                        }
                    }
                }),
            )
        })
        .workers(1)
        .bind(("127.0.0.1", 0))
        .unwrap();
        let base = format!("http://{}", server.addrs()[0]);
        tokio::spawn(server.run());
        let url = |path: &str| url::Url::parse(&format!("{base}{path}")).unwrap();
        let provider = Provider {
            issuer: base.clone(),
            authorization_endpoint: url("/auth"),
            token_endpoint: url("/token"),
            end_session_endpoint: None,
            keys: ProviderKeys::from_json(br#"{"keys":[]}"#).unwrap(),
        };
        (provider, seen)
    }

    fn client() -> Client {
        Client {
            id: "ratekeeper".to_owned(),
            secret: SecretString::from("s3cret:with&odd=chars".to_owned()),
            redirect_uri: "http://127.0.0.1:8080/login/oidc/callback".to_owned(),
        }
    }

    #[actix_web::test]
    async fn a_code_is_redeemed_with_the_verifier_and_the_clients_secret() {
        let (provider, seen) = token_endpoint().await;
        let http = provider_client().unwrap();
        let verifier = SecretString::from("v".repeat(43));
        let token = redeem(&http, &provider, &client(), "good", &verifier)
            .await
            .unwrap();
        assert_eq!(token, "h.p.s");
        let (auth, body) = seen.lock().unwrap()[0].clone();
        let decoded = STANDARD
            .decode(auth.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(
            String::from_utf8(decoded).unwrap(),
            "ratekeeper:s3cret%3Awith%26odd%3Dchars"
        );
        let pairs: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect();
        assert_eq!(pairs["grant_type"], "authorization_code");
        assert_eq!(pairs["code_verifier"], "v".repeat(43));
        assert_eq!(
            pairs["redirect_uri"],
            "http://127.0.0.1:8080/login/oidc/callback"
        );
    }

    #[actix_web::test]
    async fn a_refused_code_says_what_the_provider_said() {
        let (provider, _) = token_endpoint().await;
        let http = provider_client().unwrap();
        let verifier = SecretString::from("v".repeat(43));
        let refused = redeem(&http, &provider, &client(), "stale", &verifier)
            .await
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the provider refused the code: invalid_grant (grant request is invalid)"
        );
    }
}
