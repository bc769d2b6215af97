//! The provider's signing keys (the JWK set at its discovery document's `jwks_uri`) and
//! the check of an ID token's signature with them. Only asymmetric algorithms are taken:
//! a token signed with `none`, or with a shared secret, is refused, as is one whose key
//! the provider does not publish.

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};

use super::claims::IdClaims;

/// The algorithms an ID token may be signed with.
const SIGNING: [Algorithm; 7] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why an ID token's signature is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureRefused {
    #[error("the token is not a signed JWT")]
    Malformed,
    #[error("the token is signed with {0}, which is not accepted")]
    Algorithm(String),
    #[error("the provider publishes no key {}", match .0 {
        Some(kid) => format!("named {kid:?}"),
        None => "for a token that names none".to_owned(),
    })]
    UnknownKey(Option<String>),
    #[error("the token's signature does not match the provider's key")]
    BadSignature,
}

/// A provider's published keys.
#[derive(Debug, Clone)]
pub struct ProviderKeys {
    set: JwkSet,
}

impl ProviderKeys {
    /// The keys from the JWK set's JSON.
    pub fn from_json(body: &[u8]) -> Result<Self, serde_json::Error> {
        Ok(Self {
            set: serde_json::from_slice(body)?,
        })
    }

    /// The token's claims, once its signature is verified with the provider's key it names
    /// (or its only key, when it names none). The claims themselves are checked by
    /// [`IdClaims::check`].
    pub fn verify(&self, id_token: &str) -> Result<IdClaims, SignatureRefused> {
        let header = decode_header(id_token).map_err(|_| SignatureRefused::Malformed)?;
        if !SIGNING.contains(&header.alg) {
            return Err(SignatureRefused::Algorithm(format!("{:?}", header.alg)));
        }
        let jwk = match &header.kid {
            Some(kid) => self.set.find(kid),
            None if self.set.keys.len() == 1 => self.set.keys.first(),
            None => None,
        }
        .ok_or_else(|| SignatureRefused::UnknownKey(header.kid.clone()))?;
        let key =
            DecodingKey::from_jwk(jwk).map_err(|_| SignatureRefused::UnknownKey(header.kid))?;
        // The signature and the algorithm only: the claims' own checks, with the sign-in's
        // nonce, are IdClaims::check's.
        let mut validation = Validation::new(header.alg);
        validation.validate_exp = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        decode::<IdClaims>(id_token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature
                | jsonwebtoken::errors::ErrorKind::InvalidAlgorithm => {
                    SignatureRefused::BadSignature
                }
                _ => SignatureRefused::Malformed,
            })
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::{EncodingKey, Header, encode};
    use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};
    use serde_json::json;

    use super::*;

    /// A P-256 key: what signs with it, and its public half as a JWK named `kid`.
    fn key(kid: &str) -> (EncodingKey, serde_json::Value) {
        let pair = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let point = pair.public_key_raw();
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        });
        (EncodingKey::from_ec_der(&pair.serialize_der()), jwk)
    }

    fn claims() -> serde_json::Value {
        json!({"iss": "https://id.example.com", "sub": "u1", "aud": "ratekeeper",
               "exp": 1_800_000_300, "iat": 1_800_000_000, "nonce": "n1"})
    }

    fn signed(key: &EncodingKey, kid: Option<&str>) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = kid.map(str::to_owned);
        encode(&header, &claims(), key).unwrap()
    }

    fn keys_of(jwks: &[serde_json::Value]) -> ProviderKeys {
        ProviderKeys::from_json(json!({ "keys": jwks }).to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_token_signed_with_a_published_key_yields_its_claims() {
        let (k1, jwk1) = key("k1");
        let (k2, jwk2) = key("k2");
        let keys = keys_of(&[jwk1.clone(), jwk2]);
        for (key, kid) in [(&k1, "k1"), (&k2, "k2")] {
            let claims = keys.verify(&signed(key, Some(kid))).unwrap();
            assert_eq!(
                (claims.sub.as_str(), claims.nonce.as_deref()),
                ("u1", Some("n1"))
            );
        }
        // No kid: the only key, when there is one.
        assert!(keys_of(&[jwk1]).verify(&signed(&k1, None)).is_ok());
        assert_eq!(
            keys.verify(&signed(&k1, None)),
            Err(SignatureRefused::UnknownKey(None))
        );
    }

    #[test]
    fn a_foreign_altered_or_unsigned_token_is_refused() {
        let (k1, jwk1) = key("k1");
        let (foreign, _) = key("k1");
        let keys = keys_of(&[jwk1]);
        assert_eq!(
            keys.verify(&signed(&foreign, Some("k1"))),
            Err(SignatureRefused::BadSignature),
            "signed by another key under the same name"
        );
        assert_eq!(
            keys.verify(&signed(&k1, Some("k9"))),
            Err(SignatureRefused::UnknownKey(Some("k9".into())))
        );
        // Another payload under the same signature.
        let token = signed(&k1, Some("k1"));
        let parts: Vec<&str> = token.split('.').collect();
        let mut altered = claims();
        altered["sub"] = json!("admin");
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(altered.to_string()),
            parts[2]
        );
        assert_eq!(keys.verify(&forged), Err(SignatureRefused::BadSignature));
        // alg "none", and a shared-secret algorithm.
        for alg in ["none", "HS256"] {
            let header = URL_SAFE_NO_PAD.encode(json!({"alg": alg, "kid": "k1"}).to_string());
            let body = URL_SAFE_NO_PAD.encode(claims().to_string());
            let refused = keys.verify(&format!("{header}.{body}.")).unwrap_err();
            assert!(
                matches!(
                    refused,
                    SignatureRefused::Algorithm(_) | SignatureRefused::Malformed
                ),
                "{alg}: {refused:?}"
            );
        }
        assert_eq!(keys.verify("not a token"), Err(SignatureRefused::Malformed));
    }
}
