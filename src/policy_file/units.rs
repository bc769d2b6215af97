//! Amounts as a person writes them: rates such as `100/min` (a bare number is per
//! second) and durations such as `500ms`, `30s`, `5m`, `1h`, `1d` (a bare integer is ms).
//! The unit written is kept as the policy's display unit, so that a file read back and
//! written again says the same thing.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::domain::{DurationUnit, RateUnit};

/// A number or a text with a unit, as written in a file.
#[derive(Debug, Clone, PartialEq)]
pub enum Amount {
    Whole(i64),
    Number(f64),
    Text(String),
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Whole(n) => s.serialize_i64(*n),
            Self::Number(n) => s.serialize_f64(*n),
            Self::Text(t) => s.serialize_str(t),
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AmountVisitor)
    }
}

struct AmountVisitor;

impl Visitor<'_> for AmountVisitor {
    type Value = Amount;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or an amount with its unit, such as 100/min or 30s")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Amount, E> {
        Ok(Amount::Whole(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Amount, E> {
        i64::try_from(v)
            .map(Amount::Whole)
            .map_err(|_| E::custom("is too large"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Amount, E> {
        Ok(Amount::Number(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Amount, E> {
        Ok(Amount::Text(v.to_owned()))
    }
}

/// How each rate unit is written, first the one export uses.
const RATE_SUFFIXES: [(RateUnit, &[&str]); 4] = [
    (RateUnit::Second, &["s", "sec", "second"]),
    (RateUnit::Minute, &["min", "minute", "m"]),
    (RateUnit::Hour, &["h", "hour"]),
    (RateUnit::Day, &["day", "d"]),
];

/// How each duration unit is written (longest first, so `ms` is not read as `m`).
const DURATION_SUFFIXES: [(&str, DurationUnit); 5] = [
    ("ms", DurationUnit::Ms),
    ("s", DurationUnit::Second),
    ("m", DurationUnit::Minute),
    ("h", DurationUnit::Hour),
    ("d", DurationUnit::Day),
];

/// A rate as permits per second, and the unit it was written in (none for a bare number).
pub fn parse_rate(amount: &Amount) -> Result<(f64, Option<RateUnit>), String> {
    const HELP: &str =
        "must be a number per second or a rate such as 100/min (units: s, min, h, day)";
    let text = match amount {
        Amount::Whole(n) => return Ok((*n as f64, None)),
        Amount::Number(n) => return Ok((*n, None)),
        Amount::Text(t) => t.trim(),
    };
    let Some((number, unit)) = text.split_once('/') else {
        return text
            .parse::<f64>()
            .map(|n| (n, None))
            .map_err(|_| HELP.into());
    };
    let number: f64 = number.trim().parse().map_err(|_| HELP.to_owned())?;
    let unit = RATE_SUFFIXES
        .iter()
        .find(|(_, names)| names.contains(&unit.trim()))
        .map(|(u, _)| *u)
        .ok_or_else(|| HELP.to_owned())?;
    Ok((number / unit.seconds(), Some(unit)))
}

/// A duration in ms, and the unit it was written in (none for a bare integer).
pub fn parse_duration(amount: &Amount) -> Result<(i64, Option<DurationUnit>), String> {
    const HELP: &str =
        "must be a whole number of ms or a duration such as 500ms, 30s, 5m, 1h or 1d";
    let text = match amount {
        Amount::Whole(n) => return Ok((*n, None)),
        Amount::Number(_) => return Err(HELP.into()),
        Amount::Text(t) => t.trim(),
    };
    if let Ok(n) = text.parse::<i64>() {
        return Ok((n, None));
    }
    let (suffix, unit) = DURATION_SUFFIXES
        .iter()
        .find(|(suffix, _)| text.ends_with(suffix))
        .ok_or_else(|| HELP.to_owned())?;
    let number: i64 = text[..text.len() - suffix.len()]
        .trim()
        .parse()
        .map_err(|_| HELP.to_owned())?;
    number
        .checked_mul(unit.millis())
        .map(|ms| (ms, Some(*unit)))
        .ok_or_else(|| "is too long".to_owned())
}

/// A rate per second written in `unit` when one was chosen and reads back exactly, else
/// as a bare number per second.
pub fn render_rate(per_second: f64, unit: Option<RateUnit>) -> Amount {
    let Some(unit) = unit else {
        return Amount::Number(per_second);
    };
    let suffix = RATE_SUFFIXES
        .iter()
        .find(|(u, _)| *u == unit)
        .map_or("s", |(_, names)| names[0]);
    // The stored rate is the written number divided by the unit's seconds: the shortest
    // decimal that divides back to it exactly is the number the person wrote.
    let scaled = per_second * unit.seconds();
    (0..=15)
        .map(|digits| format!("{scaled:.digits$}"))
        .chain(std::iter::once(scaled.to_string()))
        .find(|text| text.parse::<f64>().ok().map(|n| n / unit.seconds()) == Some(per_second))
        .map_or(Amount::Number(per_second), |number| {
            Amount::Text(format!("{}/{suffix}", trim_zeros(&number)))
        })
}

/// A duration in ms written in `unit` when one was chosen and divides it, else in ms.
pub fn render_duration(ms: i64, unit: Option<DurationUnit>) -> Amount {
    match unit {
        Some(unit) if ms % unit.millis() == 0 => {
            let suffix = DURATION_SUFFIXES
                .iter()
                .find(|(_, u)| *u == unit)
                .map_or("ms", |(s, _)| s);
            Amount::Text(format!("{}{suffix}", ms / unit.millis()))
        }
        _ => Amount::Whole(ms),
    }
}

/// "2.50" as "2.5", "3.000" as "3".
fn trim_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> Amount {
        Amount::Text(t.into())
    }

    #[test]
    fn rates_read_in_their_units_and_write_back_the_same() {
        assert_eq!(
            parse_rate(&text("120/min")).unwrap(),
            (2.0, Some(RateUnit::Minute))
        );
        assert_eq!(
            parse_rate(&text("3600/h")).unwrap(),
            (1.0, Some(RateUnit::Hour))
        );
        assert_eq!(
            parse_rate(&text("86400/day")).unwrap(),
            (1.0, Some(RateUnit::Day))
        );
        assert_eq!(
            parse_rate(&text("5/s")).unwrap(),
            (5.0, Some(RateUnit::Second))
        );
        assert_eq!(parse_rate(&Amount::Whole(7)).unwrap(), (7.0, None));
        assert_eq!(parse_rate(&Amount::Number(0.5)).unwrap(), (0.5, None));
        assert!(parse_rate(&text("100/week")).is_err());
        assert!(parse_rate(&text("many/min")).is_err());
        for written in ["100/min", "7/h", "1000/day", "2.5/s", "0.3/min"] {
            let (rate, unit) = parse_rate(&text(written)).unwrap();
            assert_eq!(render_rate(rate, unit), text(written));
        }
        assert_eq!(render_rate(0.25, None), Amount::Number(0.25));
    }

    #[test]
    fn durations_read_in_their_units_and_write_back_the_same() {
        assert_eq!(
            parse_duration(&text("500ms")).unwrap(),
            (500, Some(DurationUnit::Ms))
        );
        assert_eq!(
            parse_duration(&text("30s")).unwrap(),
            (30_000, Some(DurationUnit::Second))
        );
        assert_eq!(
            parse_duration(&text("5m")).unwrap(),
            (300_000, Some(DurationUnit::Minute))
        );
        assert_eq!(
            parse_duration(&text("1h")).unwrap(),
            (3_600_000, Some(DurationUnit::Hour))
        );
        assert_eq!(
            parse_duration(&text("1d")).unwrap(),
            (86_400_000, Some(DurationUnit::Day))
        );
        assert_eq!(parse_duration(&Amount::Whole(1500)).unwrap(), (1500, None));
        assert!(parse_duration(&Amount::Number(1.5)).is_err());
        assert!(parse_duration(&text("5 weeks")).is_err());
        assert!(parse_duration(&text("99999999999999999d")).is_err());
        for written in ["500ms", "30s", "5m", "1h", "2d"] {
            let (ms, unit) = parse_duration(&text(written)).unwrap();
            assert_eq!(render_duration(ms, unit), text(written));
        }
        assert_eq!(
            render_duration(1500, Some(DurationUnit::Second)),
            Amount::Whole(1500)
        );
    }
}
