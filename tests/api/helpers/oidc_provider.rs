//! An OpenID Provider of the test's own on a loopback port: its discovery document, its
//! key set (one P-256 key made on the spot), and a token endpoint that gives, for a code
//! the test authorized, the ID token the test chose, once the PKCE verifier matches the
//! challenge. The test plays the person at the authorization endpoint.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix_web::{App, HttpResponse, HttpServer, web};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const CLIENT_ID: &str = "ratekeeper-console";
pub const CLIENT_SECRET: &str = "a client secret of the tests";
const KID: &str = "key-1";

/// Who signs an ID token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signer {
    /// The provider's published key.
    Published,
    /// A key of someone else's, under the published key's name.
    Foreign,
}

struct Grant {
    challenge: String,
    claims: Value,
    signer: Signer,
}

#[derive(Default)]
struct State {
    grants: Mutex<HashMap<String, Grant>>,
}

pub struct LocalProvider {
    pub issuer: String,
    state: Arc<State>,
    server: actix_web::dev::ServerHandle,
}

/// A P-256 key: what signs with it, and its public half as a JWK.
fn p256(kid: &str) -> (EncodingKey, Value) {
    let pair = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let point = pair.public_key_raw();
    let jwk = json!({
        "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
    });
    (EncodingKey::from_ec_der(&pair.serialize_der()), jwk)
}

#[derive(serde::Deserialize)]
struct TokenForm {
    grant_type: String,
    code: String,
    code_verifier: String,
}

impl LocalProvider {
    pub async fn start() -> Self {
        let state = Arc::new(State::default());
        let (published, jwk) = p256(KID);
        let (foreign, _) = p256(KID);
        let keys = Arc::new((published, foreign));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let issuer = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let data = web::Data::from(state.clone());
        let document = json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "jwks_uri": format!("{issuer}/jwks"),
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "id_token_signing_alg_values_supported": ["ES256"],
        });
        let jwks = json!({ "keys": [jwk] });
        let server = HttpServer::new(move || {
            let (document, jwks, keys) = (document.clone(), jwks.clone(), keys.clone());
            App::new()
                .app_data(data.clone())
                .route(
                    "/.well-known/openid-configuration",
                    web::get().to(move || {
                        let document = document.clone();
                        async move { HttpResponse::Ok().json(document) }
                    }),
                )
                .route(
                    "/jwks",
                    web::get().to(move || {
                        let jwks = jwks.clone();
                        async move { HttpResponse::Ok().json(jwks) }
                    }),
                )
                .route(
                    "/token",
                    web::post().to(move |state: web::Data<State>, form: web::Form<TokenForm>| {
                        let keys = keys.clone();
                        async move { token(&state, &form, &keys) }
                    }),
                )
        })
        .workers(1)
        .disable_signals()
        .listen(listener)
        .unwrap()
        .run();
        let handle = server.handle();
        tokio::spawn(server);
        Self {
            issuer,
            state,
            server: handle,
        }
    }

    /// Authorizes `code` for the sign-in whose PKCE challenge is `challenge`: redeemed,
    /// it gives an ID token of `claims`, signed by `signer`.
    pub fn authorize(&self, code: &str, challenge: &str, claims: Value, signer: Signer) {
        self.state.grants.lock().unwrap().insert(
            code.to_owned(),
            Grant {
                challenge: challenge.to_owned(),
                claims,
                signer,
            },
        );
    }

    pub async fn stop(&self) {
        self.server.stop(false).await;
    }
}

/// The token endpoint: the grant of the code (once), if the verifier matches its challenge.
fn token(state: &State, form: &TokenForm, keys: &(EncodingKey, EncodingKey)) -> HttpResponse {
    let refused = |why: &str| {
        HttpResponse::BadRequest().json(json!({"error": "invalid_grant", "error_description": why}))
    };
    if form.grant_type != "authorization_code" {
        return refused("not an authorization code");
    }
    let Some(grant) = state.grants.lock().unwrap().remove(&form.code) else {
        return refused("unknown or used code");
    };
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(form.code_verifier.as_bytes()));
    if challenge != grant.challenge {
        return refused("the verifier does not match the challenge");
    }
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(KID.to_owned());
    let key = match grant.signer {
        Signer::Published => &keys.0,
        Signer::Foreign => &keys.1,
    };
    let id_token = encode(&header, &grant.claims, key).unwrap();
    HttpResponse::Ok()
        .json(json!({"access_token": "unused", "token_type": "Bearer", "id_token": id_token}))
}
