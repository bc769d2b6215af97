//! A policy's validated configuration: what the SQL store keeps and the sync task pushes.

use serde::{Deserialize, Serialize};

use super::{Algorithm, AppSlug, DisplayUnits, FieldError, Millis, Override, PolicyName, Scope};

/// Largest rate and capacity we accept: far above any real limit, and small enough that
/// token arithmetic in Lua (IEEE doubles) stays exact to well below one permit.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Slowest rate we accept: one permit a year. Below it every time derived from the rate
/// (when a permit is due, when the bucket is full) would run past what a reply can carry.
pub const MIN_RATE: f64 = 1.0 / 31_536_000.0;
pub const MAX_CAPACITY: i64 = 1_000_000_000;
pub const MAX_DESCRIPTION_CHARS: usize = 1000;

/// Permits per second, fractional allowed (0.2 = 12 per minute).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Rate(f64);

impl Rate {
    pub fn parse_field(field: &str, value: f64) -> Result<Self, FieldError> {
        if value.is_finite() && (MIN_RATE..=MAX_RATE).contains(&value) {
            Ok(Self(value))
        } else {
            Err(FieldError::new(
                field,
                format!(
                    "must be a number of permits per second from one a year ({MIN_RATE:.3e}) \
                     to {MAX_RATE}"
                ),
            ))
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

/// Bucket capacity: the most permits one burst may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct MaxPermits(i64);

impl MaxPermits {
    pub fn parse_field(field: &str, value: i64) -> Result<Self, FieldError> {
        if (1..=MAX_CAPACITY).contains(&value) {
            Ok(Self(value))
        } else {
            Err(FieldError::new(
                field,
                format!("must be a whole number from 1 to {MAX_CAPACITY}"),
            ))
        }
    }

    pub fn get(self) -> i64 {
        self.0
    }
}

/// How many permits one acquire asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permits(i64);

impl Permits {
    pub fn parse(value: i64) -> Result<Self, FieldError> {
        if (1..=MAX_CAPACITY).contains(&value) {
            Ok(Self(value))
        } else {
            Err(FieldError::new(
                "permits",
                format!("must be a whole number from 1 to {MAX_CAPACITY}"),
            ))
        }
    }

    pub fn get(self) -> i64 {
        self.0
    }
}

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
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::Shadow => "shadow",
        }
    }

    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        match value {
            "enforce" => Ok(Self::Enforce),
            "shadow" => Ok(Self::Shadow),
            _ => Err(FieldError::new(field, "must be \"enforce\" or \"shadow\"")),
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
    fn rates() {
        assert!(Rate::parse_field("rate", 0.2).is_ok());
        assert!(Rate::parse_field("rate", 0.0).is_err());
        assert!(Rate::parse_field("rate", -1.0).is_err());
        assert!(Rate::parse_field("rate", f64::NAN).is_err());
        assert!(Rate::parse_field("rate", f64::INFINITY).is_err());
        assert!(Rate::parse_field("rate", 2e6).is_err());
        assert!(Rate::parse_field("rate", 1e-300).is_err());
        assert!(Rate::parse_field("rate", MIN_RATE).is_ok());
        assert!(Rate::parse_field("rate", MIN_RATE * 0.99).is_err());
    }

    #[test]
    fn capacities_and_permits() {
        assert!(MaxPermits::parse_field("max_permits", 0).is_err());
        assert!(MaxPermits::parse_field("max_permits", 1).is_ok());
        assert!(Permits::parse(0).is_err());
        assert!(Permits::parse(-3).is_err());
        assert_eq!(Permits::parse(5).unwrap().get(), 5);
    }

    #[test]
    fn enums_name_the_choices() {
        let e = Algorithm::parse_field("algorithm", "leaky").unwrap_err();
        assert!(e.message.contains("token_bucket"));
        assert!(e.message.contains("gcra"));
        assert!(FailureMode::parse_field("failure_mode", "open").is_ok());
        assert!(FailureMode::parse_field("failure_mode", "x").is_err());
        assert_eq!(Mode::parse_field("mode", "shadow"), Ok(Mode::Shadow));
        assert!(Mode::parse_field("mode", "Shadow").is_err());
    }
}
