//! The limiting algorithms a policy can use, and which parameters each one takes.

use serde::{Deserialize, Serialize};

use super::FieldError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// `rate` per second refilled, bursts of `max_permits` (the default).
    TokenBucket,
    /// `max_permits` per aligned window of `window_ms`.
    FixedWindow,
    /// `max_permits` in any window of `window_ms`, exactly (a log of grants).
    SlidingLog,
    /// `max_permits` per `window_ms`, estimated from two counters (O(1) memory).
    SlidingWindow,
    /// At most `max_permits` leases held at once, each living at most `lease_ttl_ms`.
    Concurrency,
    /// Leaky bucket as GCRA: `rate` per second, bursts of `max_permits`, one value per key.
    Gcra,
}

/// A parameter that only some algorithms take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    Rate,
    WindowMs,
    LeaseTtlMs,
}

impl Param {
    pub const ALL: [Param; 3] = [Param::Rate, Param::WindowMs, Param::LeaseTtlMs];

    pub fn field(self) -> &'static str {
        match self {
            Self::Rate => "rate",
            Self::WindowMs => "window_ms",
            Self::LeaseTtlMs => "lease_ttl_ms",
        }
    }
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::Concurrency,
        Algorithm::Gcra,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::TokenBucket => "token_bucket",
            Self::FixedWindow => "fixed_window",
            Self::SlidingLog => "sliding_log",
            Self::SlidingWindow => "sliding_window",
            Self::Concurrency => "concurrency",
            Self::Gcra => "gcra",
        }
    }

    /// The number the Lua scripts use for it (their "wrong algorithm" reply names one).
    pub fn index(self) -> i64 {
        match self {
            Self::TokenBucket => 1,
            Self::FixedWindow => 2,
            Self::SlidingLog => 3,
            Self::SlidingWindow => 4,
            Self::Concurrency => 5,
            Self::Gcra => 6,
        }
    }

    pub fn from_index(index: i64) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.index() == index)
    }

    /// Whether this algorithm takes `param` (every one takes `max_permits`).
    pub fn uses(self, param: Param) -> bool {
        matches!(
            (self, param),
            (Self::TokenBucket | Self::Gcra, Param::Rate)
                | (
                    Self::FixedWindow | Self::SlidingLog | Self::SlidingWindow,
                    Param::WindowMs
                )
                | (Self::Concurrency, Param::LeaseTtlMs)
        )
    }

    /// What a policy of this kind allows, in words, for error messages and the console.
    pub fn summary(self) -> &'static str {
        match self {
            Self::TokenBucket => "rate permits per second, in bursts of up to max_permits",
            Self::FixedWindow => "max_permits per aligned window of window_ms",
            Self::SlidingLog => "max_permits in any window of window_ms (exact)",
            Self::SlidingWindow => "max_permits per window_ms (two-counter estimate)",
            Self::Concurrency => "max_permits leases held at once, each for at most lease_ttl_ms",
            Self::Gcra => "rate permits per second, in bursts of up to max_permits",
        }
    }

    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        Self::ALL
            .into_iter()
            .find(|a| a.as_str() == value)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|a| a.as_str()).collect();
                FieldError::new(field, format!("must be one of: {}", names.join(", ")))
            })
    }
}

/// Longest window or lease we accept: a day.
pub const MAX_MILLIS: i64 = 86_400_000;

/// A duration in milliseconds (a window, a lease's lifetime), from 1 ms to a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Millis(i64);

impl Millis {
    pub fn parse_field(field: &str, value: i64) -> Result<Self, FieldError> {
        if (1..=MAX_MILLIS).contains(&value) {
            Ok(Self(value))
        } else {
            Err(FieldError::new(
                field,
                format!("must be a whole number of milliseconds from 1 to {MAX_MILLIS}"),
            ))
        }
    }

    pub fn get(self) -> i64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_algorithm_names_its_parameters() {
        assert!(Algorithm::TokenBucket.uses(Param::Rate));
        assert!(!Algorithm::TokenBucket.uses(Param::WindowMs));
        assert!(Algorithm::SlidingLog.uses(Param::WindowMs));
        assert!(Algorithm::Concurrency.uses(Param::LeaseTtlMs));
        assert!(!Algorithm::Concurrency.uses(Param::Rate));
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_index(a.index()), Some(a));
            assert_eq!(Algorithm::parse_field("algorithm", a.as_str()).unwrap(), a);
        }
        assert!(Millis::parse_field("window_ms", 0).is_err());
        assert!(Millis::parse_field("window_ms", 1000).is_ok());
    }
}
