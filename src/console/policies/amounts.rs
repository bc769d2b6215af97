//! The numbers of the policy form, read in the units the person picked: a rate per
//! second, minute, hour or day; a duration in ms, seconds, minutes, hours or days; a
//! whole number. Each error speaks the unit that was chosen ("at most 60000000 per
//! minute"), and a number too long to read is "too large", not "not a number".

use crate::console::format::number;
use crate::domain::{DurationUnit, FieldErrors, MAX_MILLIS, MAX_RATE, MIN_RATE, RateUnit};

/// A rate typed as `amount` per `unit`: (permits per second, the unit), or `None` when
/// it was left empty or has an error (recorded under `rate` or `rate_unit`).
pub fn rate(errors: &mut FieldErrors, amount: &str, unit: &str) -> Option<(f64, RateUnit)> {
    let amount = amount.trim();
    if amount.is_empty() {
        return None;
    }
    let unit = errors.check(RateUnit::parse_field("rate_unit", unit));
    let Some(value) = amount.parse::<f64>().ok().filter(|v| !v.is_nan()) else {
        errors.push("rate", "must be a number, such as 10 or 0.5");
        return None;
    };
    let unit = unit?;
    let per_second = value / unit.seconds();
    if !value.is_finite() || per_second > MAX_RATE {
        errors.push(
            "rate",
            format!(
                "is too large (at most {} per {})",
                number(MAX_RATE * unit.seconds()),
                unit.as_str()
            ),
        );
        None
    } else if per_second < MIN_RATE * (1.0 - 1e-9) {
        errors.push(
            "rate",
            "must be at least 1 per 365 days (about 0.0028 per day)",
        );
        None
    } else {
        Some((per_second.max(MIN_RATE), unit))
    }
}

/// A duration typed as `amount` in `unit` (field `field`, unit field `{field}_unit`):
/// (milliseconds, the unit), or `None` when it was left empty or has an error.
pub fn duration(
    errors: &mut FieldErrors,
    field: &str,
    amount: &str,
    unit: &str,
) -> Option<(i64, DurationUnit)> {
    let amount = amount.trim();
    if amount.is_empty() {
        return None;
    }
    let unit = errors.check(DurationUnit::parse_field(&format!("{field}_unit"), unit));
    let Some(value) = amount.parse::<f64>().ok().filter(|v| !v.is_nan()) else {
        errors.push(field, "must be a number, such as 5 or 1.5");
        return None;
    };
    let unit = unit?;
    let ms = value * unit.millis() as f64;
    if !ms.is_finite() || ms > MAX_MILLIS as f64 {
        errors.push(field, "is too large (at most 1 day)");
        None
    } else if ms < 1.0 - 1e-9 {
        errors.push(field, "must be at least 1 ms");
        None
    } else if (ms - ms.round()).abs() > 1e-6 {
        errors.push(
            field,
            format!(
                "must come to a whole number of milliseconds ({} {}s is {} ms)",
                amount,
                unit.as_str(),
                number(ms)
            ),
        );
        None
    } else {
        Some((ms.round() as i64, unit))
    }
}

/// A whole number of at most `max`, or `None` when it was left empty or has an error. A
/// number below the field's least is left to the policy's own rules, which name it.
pub fn whole(
    errors: &mut FieldErrors,
    field: &str,
    text: &str,
    max: i64,
    example: &str,
) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let digits = text.strip_prefix('+').unwrap_or(text);
    let too_large = || format!("is too large (at most {max})");
    match text.parse::<i64>() {
        Ok(v) if v > max => errors.push(field, too_large()),
        Ok(v) => return Some(v),
        // Only digits, and still no i64: a number longer than any limit.
        Err(_) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            errors.push(field, too_large());
        }
        Err(_) => errors.push(field, format!("must be a whole number, such as {example}")),
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errors: &FieldErrors) -> Vec<String> {
        errors.0.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn rates_are_read_and_refused_in_the_chosen_unit() {
        let mut errors = FieldErrors::default();
        let (per_second, unit) = rate(&mut errors, "100", "day").unwrap();
        assert_eq!((per_second * 86_400.0).round(), 100.0);
        assert_eq!(unit, RateUnit::Day);
        assert_eq!(rate(&mut errors, "", "day"), None);
        assert!(errors.is_empty());
        assert_eq!(rate(&mut errors, "70000000", "minute"), None);
        assert_eq!(rate(&mut errors, "0.001", "day"), None);
        assert_eq!(rate(&mut errors, "ten", "second"), None);
        assert_eq!(
            messages(&errors),
            [
                "rate: is too large (at most 60000000 per minute)",
                "rate: must be at least 1 per 365 days (about 0.0028 per day)",
                "rate: must be a number, such as 10 or 0.5",
            ]
        );
    }

    #[test]
    fn durations_come_to_whole_milliseconds_up_to_a_day() {
        let mut errors = FieldErrors::default();
        assert_eq!(
            duration(&mut errors, "window", "5", "minute"),
            Some((300_000, DurationUnit::Minute))
        );
        assert_eq!(
            duration(&mut errors, "window", "1.5", "second"),
            Some((1500, DurationUnit::Second))
        );
        assert!(errors.is_empty());
        assert_eq!(duration(&mut errors, "window", "2", "day"), None);
        assert_eq!(duration(&mut errors, "window", "0.0001", "second"), None);
        assert_eq!(duration(&mut errors, "window", "1", "week"), None);
        assert_eq!(errors.0.len(), 3);
        assert_eq!(errors.0[2].field, "window_unit");
    }

    #[test]
    fn a_twenty_digit_number_is_too_large_not_unreadable() {
        let mut errors = FieldErrors::default();
        assert_eq!(whole(&mut errors, "max_permits", "12", 100, "10"), Some(12));
        assert_eq!(whole(&mut errors, "max_permits", "0", 100, "10"), Some(0));
        assert_eq!(
            whole(
                &mut errors,
                "max_permits",
                "12345678901234567890",
                100,
                "10"
            ),
            None
        );
        assert_eq!(whole(&mut errors, "max_permits", "1.5", 100, "10"), None);
        assert_eq!(
            messages(&errors),
            [
                "max_permits: is too large (at most 100)",
                "max_permits: must be a whole number, such as 10",
            ]
        );
    }
}
