//! API keys and personal access tokens: random, shown once, stored as SHA-256 hashes.
//! A fast hash is right here (unlike passwords): the secrets carry 192 random bits, so
//! there is nothing to brute-force, and the acquire path checks a key on every request.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::Rng;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// Identifies an application on the acquire API.
    ApiKey,
    /// Identifies a user on the admin API.
    AccessToken,
    /// A console session cookie; also a CSRF token (never shown to anyone but its owner).
    Session,
}

impl SecretKind {
    /// A readable prefix, so a leaked secret can be recognised (and grepped for).
    fn prefix(self) -> &'static str {
        match self {
            Self::ApiKey => "rk_key_",
            Self::AccessToken => "rk_pat_",
            Self::Session => "rk_ses_",
        }
    }
}

/// A freshly made secret and its hash; the plain text leaves only once, to its owner.
pub struct Secret {
    pub plain: SecretString,
    pub hash: String,
}

impl Secret {
    pub fn generate(kind: SecretKind) -> Self {
        let bytes: [u8; 24] = rand::rng().random();
        let plain = format!("{}{}", kind.prefix(), URL_SAFE_NO_PAD.encode(bytes));
        let hash = hash_secret(&plain);
        Self {
            plain: SecretString::from(plain),
            hash,
        }
    }

    pub fn expose(&self) -> &str {
        self.plain.expose_secret()
    }

    /// Its kind's prefix and its first 4 random characters ("rk_key_3fa9"): enough to tell
    /// keys apart in a list, 24 of its 192 random bits, so nothing a guesser could use.
    pub fn shown_prefix(&self) -> &str {
        let plain = self.expose();
        let kind_end = plain
            .find('_')
            .and_then(|i| plain[i + 1..].find('_').map(|j| i + j + 2));
        let end = kind_end.map_or(plain.len(), |k| (k + 4).min(plain.len()));
        &plain[..end]
    }
}

/// Lowercase hex SHA-256 of a presented secret: what the store and the snapshot hold.
pub fn hash_secret(presented: &str) -> String {
    hex::encode(digest_secret(presented))
}

/// The SHA-256 of a secret as bytes: what the acquire path looks an API key up by, with
/// no string made for it.
pub fn digest_secret(presented: &str) -> [u8; 32] {
    Sha256::digest(presented.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_unique_and_hash_to_their_hash() {
        let a = Secret::generate(SecretKind::ApiKey);
        let b = Secret::generate(SecretKind::ApiKey);
        assert!(a.expose().starts_with("rk_key_"));
        assert_eq!(a.shown_prefix().len(), "rk_key_".len() + 4);
        assert!(a.expose().starts_with(a.shown_prefix()));
        assert_ne!(a.expose(), b.expose());
        assert_eq!(hash_secret(a.expose()), a.hash);
        assert_eq!(a.hash.len(), 64);
    }
}
