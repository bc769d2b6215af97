//! Whose bucket a policy's limit is: one shared by every allowed application (`global`),
//! one per calling application (`per_app`), or one per key that the client names
//! (`per_key`: a user, an account, an address). Keyed policies may give some callers
//! other limits (overrides).

use serde::{Deserialize, Serialize};

use super::amounts::{MaxPermits, Rate};
use super::{FieldError, Millis};

/// Most overrides one policy may have.
pub const MAX_OVERRIDES: usize = 1000;

/// Longest key a client may name, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// One bucket shared by every allowed application (the default).
    Global,
    /// One bucket per calling application: each gets the policy's full limit.
    PerApp,
    /// One bucket per key the client names in the acquire (`"key"`), shared by the
    /// allowed applications.
    PerKey,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Global, Scope::PerApp, Scope::PerKey];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::PerApp => "per_app",
            Self::PerKey => "per_key",
        }
    }

    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| FieldError::new(field, "must be one of: global, per_app, per_key"))
    }

    /// Whether each caller (an app or a key) has a bucket of its own.
    pub fn is_keyed(self) -> bool {
        self != Self::Global
    }
}

/// A key a client names on a `per_key` policy: 1 to 256 bytes of UTF-8 without control
/// characters. Opaque to ratekeeper (a user id, an account, an address).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct CallerKey(String);

impl CallerKey {
    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        if value.is_empty() || value.len() > MAX_KEY_BYTES {
            Err(FieldError::new(
                field,
                format!("must be 1 to {MAX_KEY_BYTES} bytes of UTF-8"),
            ))
        } else if value.chars().any(char::is_control) {
            Err(FieldError::new(
                field,
                "must not contain control characters",
            ))
        } else {
            Ok(Self(value.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Other limits for one caller of a keyed policy: the fields it sets replace the policy's
/// own, the others are the policy's.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The app slug (`per_app`) or the key (`per_key`) it applies to.
    pub matches: String,
    pub max_permits: Option<MaxPermits>,
    pub rate: Option<Rate>,
    pub window_ms: Option<Millis>,
    pub lease_ttl_ms: Option<Millis>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_and_keys() {
        assert_eq!(
            Scope::parse_field("scope", "per_key").unwrap(),
            Scope::PerKey
        );
        assert!(Scope::parse_field("scope", "per_user").is_err());
        assert!(!Scope::Global.is_keyed() && Scope::PerApp.is_keyed());
        assert!(CallerKey::parse_field("key", "user-42").is_ok());
        assert!(CallerKey::parse_field("key", "Zoë {braces} / ok").is_ok());
        assert!(CallerKey::parse_field("key", "").is_err());
        assert!(CallerKey::parse_field("key", &"x".repeat(256)).is_ok());
        assert!(CallerKey::parse_field("key", &"x".repeat(257)).is_err());
        assert!(CallerKey::parse_field("key", &"é".repeat(129)).is_err());
        assert!(CallerKey::parse_field("key", "a\nb").is_err());
    }
}
