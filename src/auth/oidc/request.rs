//! The first leg of an authorization-code sign-in with PKCE (RFC 7636) and OpenID
//! Connect's nonce: three random values the server keeps for the browser's return, and
//! the provider's authorization URL the browser is sent to. `state` ties the return to
//! this browser (a forged return carries another), the verifier proves that whoever
//! redeems the code started the sign-in, and the nonce ties the ID token to it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::Rng;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use url::Url;

/// One sign-in begun: kept by the server (never in the browser) until the provider sends
/// the browser back.
pub struct SignInRequest {
    pub state: String,
    pub nonce: String,
    pub verifier: SecretString,
}

/// 32 random bytes, base64url: 43 characters, within PKCE's 43 to 128.
fn random_text() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    URL_SAFE_NO_PAD.encode(bytes)
}

impl SignInRequest {
    pub fn new() -> Self {
        Self {
            state: random_text(),
            nonce: random_text(),
            verifier: SecretString::from(random_text()),
        }
    }

    /// The provider's authorization URL for this sign-in: the `authorization_endpoint`
    /// of its discovery document with the request's parameters.
    pub fn authorization_url(&self, endpoint: &Url, client_id: &str, redirect_uri: &str) -> Url {
        let mut url = endpoint.clone();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", "openid profile")
            .append_pair("state", &self.state)
            .append_pair("nonce", &self.nonce)
            .append_pair(
                "code_challenge",
                &pkce_challenge(self.verifier.expose_secret()),
            )
            .append_pair("code_challenge_method", "S256");
        url
    }
}

impl Default for SignInRequest {
    fn default() -> Self {
        Self::new()
    }
}

/// PKCE's S256 challenge of a verifier: base64url(SHA-256(verifier)).
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636, appendix B.
    #[test]
    fn the_challenge_is_rfc_7636s() {
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn each_sign_in_has_its_own_values_and_the_url_carries_them() {
        let one = SignInRequest::new();
        let two = SignInRequest::new();
        assert_ne!(one.state, two.state);
        assert_ne!(one.nonce, two.nonce);
        assert_eq!(one.verifier.expose_secret().len(), 43);

        let endpoint = Url::parse("https://id.example.com/auth?tenant=a").unwrap();
        let url = one.authorization_url(&endpoint, "ratekeeper", "https://rk.example.com/cb");
        let pairs: std::collections::HashMap<String, String> =
            url.query_pairs().into_owned().collect();
        assert_eq!(pairs["tenant"], "a", "the endpoint's own parameters stay");
        assert_eq!(pairs["response_type"], "code");
        assert_eq!(pairs["client_id"], "ratekeeper");
        assert_eq!(pairs["redirect_uri"], "https://rk.example.com/cb");
        assert_eq!(pairs["state"], one.state);
        assert_eq!(pairs["nonce"], one.nonce);
        assert_eq!(pairs["code_challenge_method"], "S256");
        assert_eq!(
            pairs["code_challenge"],
            pkce_challenge(one.verifier.expose_secret())
        );
        assert!(
            !url.as_str().contains(one.verifier.expose_secret()),
            "the verifier never leaves the server"
        );
        assert!(pairs["scope"].split(' ').any(|s| s == "openid"));
    }
}
