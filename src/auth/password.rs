//! argon2id password hashing, always off the async runtime (it takes tens of ms of CPU).

use argon2::password_hash::phc::PasswordHash;
use argon2::{Argon2, PasswordHasher, PasswordVerifier};
use secrecy::{ExposeSecret, SecretString};

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("password hashing failed: {0}")]
    Hash(String),
    #[error("the password hashing task died")]
    Task(#[from] tokio::task::JoinError),
}

pub async fn hash_password(password: SecretString) -> Result<String, PasswordError> {
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.expose_secret().as_bytes())
            .map(|h| h.to_string())
            .map_err(|e| PasswordError::Hash(e.to_string()))
    })
    .await?
}

/// `true` when `password` matches `stored`. With `stored = None` (unknown user) it checks
/// against a fixed dummy hash, so the answer takes as long as for a wrong password.
pub async fn verify_password(
    password: SecretString,
    stored: Option<String>,
) -> Result<bool, PasswordError> {
    tokio::task::spawn_blocking(move || {
        let known = stored.is_some();
        let stored = stored.unwrap_or_else(|| DUMMY_HASH.to_owned());
        let parsed = PasswordHash::new(&stored).map_err(|e| PasswordError::Hash(e.to_string()))?;
        let ok = Argon2::default()
            .verify_password(password.expose_secret().as_bytes(), &parsed)
            .is_ok();
        Ok(ok && known)
    })
    .await?
}

/// argon2id of a random string with the default parameters.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$gZiV/M1gPc22ElAH/Jh1Hw$CWOrkoo7oJBQ/iyh7uJ0LO2aLEfrHwTWllSAxT0zRno";

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_unknown_users_never_match() {
        let hash = hash_password(SecretString::from("s3cret pass"))
            .await
            .unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(
            verify_password(SecretString::from("s3cret pass"), Some(hash.clone()))
                .await
                .unwrap()
        );
        assert!(
            !verify_password(SecretString::from("wrong"), Some(hash))
                .await
                .unwrap()
        );
        assert!(
            !verify_password(SecretString::from("anything"), None)
                .await
                .unwrap()
        );
    }
}
