//! Amounts a policy is made of: a rate, a capacity, and the permits one acquire asks for.

use serde::Serialize;

use super::FieldError;

/// Largest rate and capacity we accept: far above any real limit, and small enough that
/// token arithmetic in Lua (IEEE doubles) stays exact to well below one permit.
pub const MAX_RATE: f64 = 1_000_000.0;
/// Slowest rate we accept: one permit a year. Below it every time derived from the rate
/// (when a permit is due, when the bucket is full) would run past what a reply can carry.
pub const MIN_RATE: f64 = 1.0 / 31_536_000.0;
pub const MAX_CAPACITY: i64 = 1_000_000_000;

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

/// What one acquire (or one item of an all-or-nothing acquire) asks: permits to take, or a
/// check (`permits: 0`, Envoy's `hits_addend: 0`): whether one permit would be granted now,
/// taking nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckOrPermits {
    Check,
    Take(Permits),
}

impl CheckOrPermits {
    /// 0 is a check; 1 to [`MAX_CAPACITY`] take that many; anything else names `field`.
    pub fn parse_field(field: &str, value: i64) -> Result<Self, FieldError> {
        match value {
            0 => Ok(Self::Check),
            1..=MAX_CAPACITY => Ok(Self::Take(Permits(value))),
            _ => Err(FieldError::new(
                field,
                format!("must be a whole number from 0 (a check) to {MAX_CAPACITY}"),
            )),
        }
    }

    /// The permits a decision is taken on: a check is decided as one permit.
    pub fn decided_as(self) -> Permits {
        match self {
            Self::Check => Permits(1),
            Self::Take(permits) => permits,
        }
    }

    pub fn is_check(self) -> bool {
        self == Self::Check
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_permits_is_a_check() {
        assert_eq!(
            CheckOrPermits::parse_field("permits", 0),
            Ok(CheckOrPermits::Check)
        );
        assert_eq!(
            CheckOrPermits::parse_field("permits", 3).map(CheckOrPermits::decided_as),
            Ok(Permits(3))
        );
        assert_eq!(CheckOrPermits::Check.decided_as(), Permits(1));
        let error = CheckOrPermits::parse_field("all[2].permits", -1).unwrap_err();
        assert_eq!(error.field, "all[2].permits");
        assert!(CheckOrPermits::parse_field("permits", MAX_CAPACITY + 1).is_err());
    }

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
}
