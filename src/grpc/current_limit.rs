//! A bucket's limits as Envoy's `current_limit`: a whole number of requests per unit
//! (SECOND to YEAR). The unit is the smallest in which the rate is whole, so 10/s is
//! `10 per SECOND` and 0.5/s `30 per MINUTE`; a window algorithm whose window is exactly
//! one unit says its `max_permits` per that unit.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;

use crate::domain::PolicyName;
use ratekeeper_limiter::BucketLimits;

/// Envoy's units, smallest first, with their length in seconds (a month is 30 days and a
/// year 365, as envoyproxy/ratelimit counts them).
const UNITS: [(Unit, i64); 7] = [
    (Unit::Second, 1),
    (Unit::Minute, 60),
    (Unit::Hour, 3_600),
    (Unit::Day, 86_400),
    (Unit::Week, 604_800),
    (Unit::Month, 2_592_000),
    (Unit::Year, 31_536_000),
];

/// How near a whole number a rate times a unit must be to count as whole (a rate is a
/// float: 0.1/s times 60 is 6.000000000000001).
const WHOLE: f64 = 1e-6;

/// The `current_limit` of a bucket with these limits, named after its policy.
pub fn current_limit(name: &PolicyName, limits: &BucketLimits) -> RateLimit {
    let (requests_per_unit, unit) = per_unit(limits);
    RateLimit {
        name: name.as_str().to_owned(),
        requests_per_unit,
        unit: unit as i32,
    }
}

fn per_unit(limits: &BucketLimits) -> (u32, Unit) {
    if let Some(window_ms) = limits.window_ms {
        if let Some(&(unit, _)) = UNITS.iter().find(|(_, s)| s * 1000 == window_ms) {
            return (clamp(limits.max_permits as f64), unit);
        }
        return whole_per_unit(limits.max_permits as f64 * 1000.0 / window_ms as f64);
    }
    whole_per_unit(limits.rate)
}

/// `per_second` in the smallest unit where it is whole; in a year, rounded, when it is
/// whole in none (a year is the finest grain there is then).
fn whole_per_unit(per_second: f64) -> (u32, Unit) {
    UNITS
        .iter()
        .map(|&(unit, seconds)| (per_second * seconds as f64, unit))
        .find(|(requests, _)| (requests - requests.round()).abs() < WHOLE && *requests >= 1.0)
        .map_or_else(
            || (clamp(per_second * 31_536_000.0), Unit::Year),
            |(requests, unit)| (clamp(requests), unit),
        )
}

fn clamp(requests: f64) -> u32 {
    requests.round().clamp(0.0, f64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(rate: f64) -> BucketLimits {
        BucketLimits {
            max_permits: 10,
            rate,
            window_ms: None,
            lease_ttl_ms: None,
        }
    }

    fn window(max_permits: i64, window_ms: i64) -> BucketLimits {
        BucketLimits {
            max_permits,
            rate: 0.0,
            window_ms: Some(window_ms),
            lease_ttl_ms: None,
        }
    }

    #[test]
    fn a_rate_is_told_in_the_smallest_unit_where_it_is_whole() {
        assert_eq!(per_unit(&rate(10.0)), (10, Unit::Second));
        assert_eq!(per_unit(&rate(0.5)), (30, Unit::Minute));
        assert_eq!(per_unit(&rate(0.1)), (6, Unit::Minute));
        assert_eq!(per_unit(&rate(1.0 / 3600.0)), (1, Unit::Hour));
        assert_eq!(per_unit(&rate(100.0 / 86_400.0)), (100, Unit::Day));
        assert_eq!(per_unit(&rate(1.0 / 604_800.0)), (1, Unit::Week));
        // Whole in no unit: a year, rounded.
        assert_eq!(per_unit(&rate(0.123_456_789)), (3_893_333, Unit::Year));
    }

    #[test]
    fn a_window_of_one_unit_tells_its_max_permits_per_that_unit() {
        assert_eq!(per_unit(&window(100, 60_000)), (100, Unit::Minute));
        assert_eq!(per_unit(&window(7, 86_400_000)), (7, Unit::Day));
        // Other windows: their rate, in the smallest whole unit.
        assert_eq!(per_unit(&window(100, 10_000)), (10, Unit::Second));
        assert_eq!(per_unit(&window(5, 120_000)), (150, Unit::Hour));
    }
}
