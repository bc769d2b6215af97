//! Standard Webhooks signatures (<https://www.standardwebhooks.com>): a receiver checks
//! that a delivery came from us, unchanged and recently, with any of the specification's
//! libraries. The secret is `whsec_` and the base64 of random bytes; a delivery carries
//! `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`
//! (`v1,` and the base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}` keyed by the
//! secret's bytes).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::Rng;
use secrecy::{ExposeSecret, SecretBox, SecretString};
use sha2::Sha256;

const PREFIX: &str = "whsec_";

/// Random bytes in a new secret: the specification asks for 24 to 64.
const SECRET_BYTES: usize = 32;

/// A webhook's signing secret.
pub struct WebhookSecret {
    key: SecretBox<Vec<u8>>,
}

impl WebhookSecret {
    /// A new random secret.
    pub fn generate() -> Self {
        let key: [u8; SECRET_BYTES] = rand::rng().random();
        Self {
            key: SecretBox::new(Box::new(key.to_vec())),
        }
    }

    /// A secret as its text (`whsec_...`) holds it.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let encoded = text.strip_prefix(PREFIX).ok_or(SecretError::Prefix)?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| SecretError::Encoding)?;
        if !(24..=64).contains(&key.len()) {
            return Err(SecretError::Length(key.len()));
        }
        Ok(Self {
            key: SecretBox::new(Box::new(key)),
        })
    }

    /// Its text, shown to its owner once and stored to sign with.
    pub fn text(&self) -> SecretString {
        SecretString::from(format!(
            "{PREFIX}{}",
            STANDARD.encode(self.key.expose_secret())
        ))
    }

    /// The `webhook-signature` header of a delivery with this id, time and body.
    pub fn sign(&self, id: &str, timestamp_s: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key.expose_secret())
            .expect("HMAC takes a key of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp_s.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// Why a secret's text is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("a webhook secret begins with {PREFIX}")]
    Prefix,
    #[error("a webhook secret is {PREFIX} and standard base64")]
    Encoding,
    #[error("a webhook secret holds 24 to 64 bytes, not {0}")]
    Length(usize),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_survives_its_text_and_signs_the_same() {
        let secret = WebhookSecret::generate();
        let text = secret.text();
        assert!(text.expose_secret().starts_with("whsec_"));
        let again = WebhookSecret::parse(text.expose_secret()).unwrap();
        assert_eq!(
            secret.sign("msg_1", 1_700_000_000, b"{}"),
            again.sign("msg_1", 1_700_000_000, b"{}")
        );
        // Another id, time or body: another signature.
        let signed = secret.sign("msg_1", 1_700_000_000, b"{}");
        assert_ne!(signed, secret.sign("msg_2", 1_700_000_000, b"{}"));
        assert_ne!(signed, secret.sign("msg_1", 1_700_000_001, b"{}"));
        assert_ne!(signed, secret.sign("msg_1", 1_700_000_000, b"{ }"));
    }

    /// HMAC-SHA256 of "id.timestamp.body", base64: the value is what the specification's
    /// own Python library (PyPI `standardwebhooks`, `Webhook(secret).sign(...)`) gives for
    /// the same secret, id, time and body.
    #[test]
    fn the_signature_is_hmac_sha256_of_id_time_and_body() {
        let secret =
            WebhookSecret::parse("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap();
        assert_eq!(
            secret.sign("msg_2", 1_700_000_000, br#"{"a":1}"#),
            "v1,vKgOppvabnpwn1OKIOXqY3Wib5DBDhUuVXCJUoOmrJU="
        );
    }

    #[test]
    fn a_malformed_secret_is_refused_saying_why() {
        assert_eq!(
            WebhookSecret::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").err(),
            Some(SecretError::Prefix)
        );
        assert_eq!(
            WebhookSecret::parse("whsec_not base64!").err(),
            Some(SecretError::Encoding)
        );
        assert_eq!(
            WebhookSecret::parse("whsec_AAEC").err(),
            Some(SecretError::Length(3))
        );
    }
}
