//! A policy's validated configuration: what the SQL store keeps and the sync task pushes.

use serde::{Deserialize, Serialize};

use super::{
    Algorithm, AppSlug, DescriptorPattern, DisplayUnits, FieldError, MaxPermits, Millis, Override,
    PolicyName, Rate, Scope,
};

pub const MAX_DESCRIPTION_CHARS: usize = 1000;

/// What the acquire API answers when Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// Refuse (503): the protected resource is safer unreached than overrun.
    Closed,
    /// Grant, marked `"degraded": true`: availability matters more than the limit.
    Open,
}

impl FailureMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
        }
    }

    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        match value {
            "closed" => Ok(Self::Closed),
            "open" => Ok(Self::Open),
            _ => Err(FieldError::new(field, "must be \"closed\" or \"open\"")),
        }
    }
}

/// Whether a policy's denials are carried out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Deny what the limit denies (429).
    #[default]
    Enforce,
    /// Decide and count exactly as if enforced, but grant every request, marked
    /// `"shadow_denied": true` where it would have been denied: a new limit can be watched
    /// on real traffic before it bites.
    Shadow,
    /// Deny every request, deciding nothing in Redis: a blocklist entry (Envoy's limit of 0)
    /// or a brake an owner pulls in an incident. The limit's own fields are kept for when the
    /// policy is enforced again.
    Block,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Shadow => "shadow",
            Self::Block => "block",
        }
    }

    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        match value {
            "enforce" => Ok(Self::Enforce),
            "shadow" => Ok(Self::Shadow),
            "block" => Ok(Self::Block),
            _ => Err(FieldError::new(
                field,
                "must be \"enforce\", \"shadow\" or \"block\"",
            )),
        }
    }
}

/// A policy's whole configuration, every part valid.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySpec {
    pub name: PolicyName,
    pub owner_app: AppSlug,
    pub algorithm: Algorithm,
    /// The algorithm's own parameters: each is `Some` exactly when the algorithm uses it
    /// (see [`Algorithm::uses`]); `max_permits` every algorithm uses.
    pub rate: Option<Rate>,
    pub max_permits: MaxPermits,
    pub window_ms: Option<Millis>,
    pub lease_ttl_ms: Option<Millis>,
    pub allowed_apps: Vec<AppSlug>,
    pub failure_mode: FailureMode,
    pub enabled: bool,
    /// Enforced, or decided and counted without denying.
    pub mode: Mode,
    pub description: String,
    /// Whose bucket: shared, per calling app, or per client-named key.
    pub scope: Scope,
    /// Other limits for some callers; empty unless the scope is keyed.
    pub overrides: Vec<Override>,
    /// Envoy-style descriptor patterns that find this policy from a gateway's descriptor
    /// (besides its name as `generic_key`); a bare entry needs the `per_key` scope.
    pub descriptors: Vec<DescriptorPattern>,
    /// The units the limits were entered in, for showing them back; no effect on limiting.
    pub units: DisplayUnits,
}

/// Free text of at most [`MAX_DESCRIPTION_CHARS`]; line breaks and tabs are fine, other
/// control characters (NUL, which PostgreSQL refuses, among them) are not.
pub fn check_description(field: &str, value: &str) -> Result<String, FieldError> {
    if value
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        Err(FieldError::new(
            field,
            "must not contain control characters other than line breaks and tabs",
        ))
    } else if value.chars().count() > MAX_DESCRIPTION_CHARS {
        Err(FieldError::new(
            field,
            format!("must be at most {MAX_DESCRIPTION_CHARS} characters"),
        ))
    } else {
        Ok(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_name_the_choices() {
        let e = Algorithm::parse_field("algorithm", "leaky").unwrap_err();
        assert!(e.message.contains("token_bucket"));
        assert!(e.message.contains("gcra"));
        assert!(FailureMode::parse_field("failure_mode", "open").is_ok());
        assert!(FailureMode::parse_field("failure_mode", "x").is_err());
        assert_eq!(Mode::parse_field("mode", "shadow"), Ok(Mode::Shadow));
        assert!(Mode::parse_field("mode", "Shadow").is_err());
        assert_eq!(Mode::parse_field("mode", "block"), Ok(Mode::Block));
    }
}
