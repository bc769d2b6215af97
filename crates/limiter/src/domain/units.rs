//! The units a person chose for a policy's numbers ("100 per day", "a window of 5
//! minutes"): kept with the policy so that the console shows them back as entered. They
//! change nothing about the limit itself, which is always stored per second and in ms.

use serde::Serialize;

use super::FieldError;

/// The unit a rate is read in: permits per second, minute, hour or day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RateUnit {
    Second,
    Minute,
    Hour,
    Day,
}

impl RateUnit {
    pub const ALL: [RateUnit; 4] = [Self::Second, Self::Minute, Self::Hour, Self::Day];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Second => "second",
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::Day => "day",
        }
    }

    pub fn seconds(self) -> f64 {
        match self {
            Self::Second => 1.0,
            Self::Minute => 60.0,
            Self::Hour => 3600.0,
            Self::Day => 86_400.0,
        }
    }

    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        Self::ALL
            .into_iter()
            .find(|u| u.as_str() == value)
            .ok_or_else(|| FieldError::new(field, "must be second, minute, hour or day"))
    }
}

/// The unit a duration (a window, a lease's lifetime) is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DurationUnit {
    Ms,
    Second,
    Minute,
    Hour,
    Day,
}

impl DurationUnit {
    pub const ALL: [DurationUnit; 5] =
        [Self::Ms, Self::Second, Self::Minute, Self::Hour, Self::Day];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ms => "ms",
            Self::Second => "second",
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::Day => "day",
        }
    }

    pub fn millis(self) -> i64 {
        match self {
            Self::Ms => 1,
            Self::Second => 1000,
            Self::Minute => 60_000,
            Self::Hour => 3_600_000,
            Self::Day => 86_400_000,
        }
    }

    /// The largest unit in which `ms` is a whole number: how a duration entered with no
    /// unit (through the JSON API) reads best.
    pub fn largest_whole(ms: i64) -> Self {
        Self::ALL
            .into_iter()
            .rev()
            .find(|u| ms % u.millis() == 0)
            .unwrap_or(Self::Ms)
    }

    pub fn parse_field(field: &str, value: &str) -> Result<Self, FieldError> {
        Self::ALL
            .into_iter()
            .find(|u| u.as_str() == value)
            .ok_or_else(|| FieldError::new(field, "must be ms, second, minute, hour or day"))
    }
}

/// The units chosen for a policy's rate, window and lease lifetime: `None` where none was
/// chosen (a policy made through the JSON API) or the algorithm takes no such field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DisplayUnits {
    pub rate: Option<RateUnit>,
    pub window: Option<DurationUnit>,
    pub lease_ttl: Option<DurationUnit>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_parse_by_name_and_durations_pick_the_largest_whole_unit() {
        for u in RateUnit::ALL {
            assert_eq!(RateUnit::parse_field("rate_unit", u.as_str()).unwrap(), u);
        }
        for u in DurationUnit::ALL {
            assert_eq!(
                DurationUnit::parse_field("window_unit", u.as_str()).unwrap(),
                u
            );
        }
        assert!(RateUnit::parse_field("rate_unit", "year").is_err());
        assert_eq!(DurationUnit::largest_whole(300_000), DurationUnit::Minute);
        assert_eq!(DurationUnit::largest_whole(1500), DurationUnit::Ms);
        assert_eq!(DurationUnit::largest_whole(86_400_000), DurationUnit::Day);
    }
}
