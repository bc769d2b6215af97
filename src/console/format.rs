//! How values read on a page: rates in words, code names as people say them, times
//! relative to now.

use crate::control::PolicyView;
use crate::domain::{DurationUnit, RateUnit};

const UNITS: [(&str, f64); 4] = [
    ("second", 1.0),
    ("minute", 60.0),
    ("hour", 3600.0),
    ("day", 86_400.0),
];

/// A rate in permits per second, as a person would say it: "10 per second",
/// "12 per minute", "3.6 per hour": the smallest unit in which it is at least 1.
pub fn readable_rate(per_second: f64) -> String {
    let (amount, unit) = rate_in_unit(per_second);
    format!("{} per {unit}", number(amount))
}

/// The rate as (amount, unit) in the smallest unit where the amount is at least 1; the
/// policy form shows a stored rate this way.
pub fn rate_in_unit(per_second: f64) -> (f64, &'static str) {
    UNITS
        .iter()
        .map(|&(unit, seconds)| (per_second * seconds, unit))
        .find(|&(amount, _)| amount >= 1.0 - 1e-9)
        .unwrap_or((per_second * 86_400.0, "day"))
}

/// The rates in the smallest unit in which each is a whole number of at least 1 ("100 per
/// minute", not "1.667 per second"), one unit for all when one fits them all, so a change
/// reads "100 per minute → 200 per minute"; a rate whole in no unit reads as
/// [`readable_rate`] says.
pub fn rates_in_one_unit(rates: &[f64]) -> Vec<String> {
    let whole_in = |r: f64, seconds: f64| {
        let amount = r * seconds;
        amount >= 1.0 - 1e-9 && (amount - amount.round()).abs() <= 1e-6 * amount.max(1.0)
    };
    let common = UNITS
        .iter()
        .find(|&&(_, seconds)| rates.iter().all(|&r| whole_in(r, seconds)));
    rates
        .iter()
        .map(|&r| match common {
            Some(&(unit, seconds)) => format!("{} per {unit}", number(r * seconds)),
            None => UNITS
                .iter()
                .find(|&&(_, seconds)| whole_in(r, seconds))
                .map_or_else(
                    || readable_rate(r),
                    |&(unit, seconds)| format!("{} per {unit}", number(r * seconds)),
                ),
        })
        .collect()
}

fn is_whole(x: f64) -> bool {
    (x - x.round()).abs() < 1e-9
}

/// At most three decimals, without trailing zeros.
pub fn number(x: f64) -> String {
    if is_whole(x) {
        return format!("{}", x.round() as i64);
    }
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A duration in ms as a person would say it: "100 ms", "second", "5 s", "minute",
/// "90 min", "hour"; used as "40 per {this}".
pub fn readable_window(ms: i64) -> String {
    match ms {
        1000 => "second".to_owned(),
        60_000 => "minute".to_owned(),
        3_600_000 => "hour".to_owned(),
        86_400_000 => "day".to_owned(),
        ms if ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{} s", ms / 1000),
        ms => format!("{ms} ms"),
    }
}

/// A duration in ms in the largest unit that holds it whole: "500 ms", "30 s", "90 s",
/// "1 min", "2 h", "1 day": how the diffs of a window or a lease time read.
pub fn duration(ms: i64) -> String {
    const UNITS: [(i64, &str); 4] = [
        (86_400_000, "day"),
        (3_600_000, "h"),
        (60_000, "min"),
        (1000, "s"),
    ];
    UNITS
        .iter()
        .find(|(size, _)| ms != 0 && ms % size == 0)
        .map_or_else(
            || format!("{ms} ms"),
            |&(size, unit)| match (ms / size, unit) {
                (n, "day") if n != 1 => format!("{n} days"),
                (n, unit) => format!("{n} {unit}"),
            },
        )
}

/// What a policy allows, in words, whatever its algorithm, in the units it was entered
/// in: "100 per day", "40 per 5 minutes", "8 at once (leases up to 30 seconds)".
pub fn readable_limit(policy: &PolicyView) -> String {
    match (policy.rate, policy.window_ms, policy.lease_ttl_ms) {
        (Some(rate), _, _) => match policy.rate_unit {
            Some(unit) => format!("{} per {}", number(rate * unit.seconds()), unit.as_str()),
            None => readable_rate(rate),
        },
        (None, Some(window), _) => format!(
            "{} per {}",
            policy.max_permits,
            match policy.window_unit {
                Some(unit) => duration_words(window, unit, true),
                None => readable_window(window),
            }
        ),
        (None, None, Some(ttl)) => format!(
            "{} at once (leases up to {})",
            policy.max_permits,
            match policy.lease_ttl_unit {
                Some(unit) => duration_words(ttl, unit, false),
                None => readable_window(ttl)
                    .replace("second", "1 s")
                    .replace("minute", "1 min")
                    .replace("hour", "1 h")
                    .replace("day", "1 day"),
            }
        ),
        (None, None, None) => String::new(),
    }
}

/// A duration in a unit: "5 minutes", "1.5 seconds", "100 ms"; exactly one unit reads as
/// the unit alone ("minute", as in "40 per minute") when `alone_if_one`.
fn duration_words(ms: i64, unit: DurationUnit, alone_if_one: bool) -> String {
    let amount = ms as f64 / unit.millis() as f64;
    match (unit, is_whole(amount) && amount.round() == 1.0) {
        (DurationUnit::Ms, _) => format!("{} ms", number(amount)),
        (_, true) if alone_if_one => unit.as_str().to_owned(),
        (_, true) => format!("1 {}", unit.as_str()),
        (_, false) => format!("{} {}s", number(amount), unit.as_str()),
    }
}

/// The unit a rate reads in: the one it was entered in, else the smallest in which it is
/// at least 1.
pub fn rate_unit_of(per_second: f64, chosen: Option<RateUnit>) -> RateUnit {
    chosen.unwrap_or_else(|| {
        let (_, unit) = rate_in_unit(per_second);
        RateUnit::parse_field("rate_unit", unit).unwrap_or(RateUnit::Day)
    })
}

/// An amount as a form shows it back: as typed, without the noise of binary fractions
/// (100 per day is stored per second and reads back as 100, not 100.00000000000001).
pub fn amount(x: f64) -> String {
    if !x.is_finite() || x == 0.0 {
        return x.to_string();
    }
    // Twelve significant digits: more than anyone types, fewer than the noise.
    format!("{x:.11e}").parse::<f64>().unwrap_or(x).to_string()
}

/// The name people use for a code value of the console's choices: algorithms, failure
/// modes and scopes ("token_bucket" is "Token bucket"). One place, so that every page
/// says the same; a value it does not know is shown as it is.
pub fn friendly_name(code: &str) -> &str {
    match code {
        "token_bucket" => "Token bucket",
        "fixed_window" => "Fixed window",
        "sliding_log" => "Sliding log",
        "sliding_window" => "Sliding window",
        "concurrency" => "Concurrency (leases)",
        "gcra" => "GCRA (leaky bucket)",
        "closed" => "Fail closed: refuse when Redis is unreachable",
        "open" => "Fail open: grant when Redis is unreachable",
        "global" => "Global: one bucket shared by every allowed app",
        "per_app" => "Per app: each calling application has its own bucket",
        "per_key" => "Per key: each key a client names has its own bucket",
        "enforce" => "Enforce: deny what the limit denies",
        "shadow" => "Shadow: decide and count, but grant everything",
        "block" => "Block: deny every request (a blocklist entry, an incident brake)",
        other => other,
    }
}

/// Seconds in a unit of the rate form.
pub fn unit_seconds(unit: &str) -> Option<f64> {
    UNITS.iter().find(|(u, _)| *u == unit).map(|&(_, s)| s)
}

/// A moment shown relative to now ("5 min ago"), with the exact time in UTC on hover
/// and for machines: `<time datetime="..." title="...">5 min ago</time>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moment {
    /// RFC 3339, for `datetime`.
    pub iso: String,
    /// "2026-11-22 04:19:07 UTC", for `title`.
    pub exact: String,
    pub relative: String,
}

impl std::fmt::Display for Moment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "<time datetime=\"{}\" title=\"{}\">{}</time>",
            self.iso, self.exact, self.relative
        )
    }
}

/// Its parts are made here from a number only (digits, dashes, colons, letters of fixed
/// words), so its markup needs no escaping.
impl askama::filters::HtmlSafe for Moment {}

/// "just now", "5 min ago", "3 h ago", "2 days ago", or the date, as a [`Moment`].
pub fn ago(ms: i64, now_ms: i64) -> Moment {
    let secs = (now_ms - ms).max(0) / 1000;
    let at = chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    let relative = match secs {
        0..=59 => "just now".to_owned(),
        60..=3599 => format!("{} min ago", secs / 60),
        3600..=86_399 => format!("{} h ago", secs / 3600),
        86_400..=2_591_999 => format!("{} days ago", secs / 86_400),
        _ => at.format("%Y-%m-%d").to_string(),
    };
    Moment {
        iso: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        exact: at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        relative,
    }
}

/// An RFC 3339 time as stored in views, shortened for a table ("2026-11-22 04:19:07 UTC").
pub fn short_time(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| rfc3339.to_owned())
}

/// Percent-encodes everything but unreserved characters and '/', for a query value.
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The action words that may end a policy's console path (`/policies/{name}/edit`).
const POLICY_ACTIONS: [&str; 5] = ["overview", "edit", "delete", "reset", "history"];

/// A policy's page: `/policies/{name}`, its permalink. A name whose last segment is an
/// action word (`a/edit`) would read as that action: its page is `/policies/{name}/overview`
/// instead, which answers for every policy.
pub fn policy_href(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    if POLICY_ACTIONS.contains(&last) {
        format!("/policies/{name}/overview")
    } else {
        format!("/policies/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_like_speech() {
        assert_eq!(readable_rate(10.0), "10 per second");
        assert_eq!(readable_rate(0.2), "12 per minute");
        assert_eq!(readable_rate(1.0 / 60.0), "1 per minute");
        assert_eq!(readable_rate(1.0 / 3600.0), "1 per hour");
        assert_eq!(readable_rate(2.5), "2.5 per second");
        assert_eq!(readable_rate(0.001), "3.6 per hour");
        assert_eq!(readable_rate(0.00001), "0.864 per day");
        assert_eq!(rate_in_unit(2.5), (2.5, "second"));
        assert_eq!(readable_window(100), "100 ms");
        assert_eq!(readable_window(60_000), "minute");
        assert_eq!(readable_window(90_000), "90 s");
        assert_eq!(
            rates_in_one_unit(&[100.0 / 60.0, 200.0 / 60.0]),
            ["100 per minute", "200 per minute"]
        );
        assert_eq!(
            rates_in_one_unit(&[10.0, 0.2]),
            ["600 per minute", "12 per minute"]
        );
        assert_eq!(rates_in_one_unit(&[100.0 / 86_400.0]), ["100 per day"]);
        assert_eq!(rates_in_one_unit(&[0.00001]), ["0.864 per day"]);
        assert_eq!(duration(500), "500 ms");
        assert_eq!(duration(1500), "1500 ms");
        assert_eq!(duration(30_000), "30 s");
        assert_eq!(duration(90_000), "90 s");
        assert_eq!(duration(60_000), "1 min");
        assert_eq!(duration(7_200_000), "2 h");
        assert_eq!(duration(86_400_000), "1 day");
        assert_eq!(duration(172_800_000), "2 days");
        assert_eq!(amount(100.0 / 86_400.0 * 86_400.0), "100");
        assert_eq!(amount(0.1 + 0.2), "0.3");
        assert_eq!(amount(2.5), "2.5");
        assert_eq!(
            duration_words(300_000, DurationUnit::Minute, true),
            "5 minutes"
        );
        assert_eq!(duration_words(60_000, DurationUnit::Minute, true), "minute");
        assert_eq!(
            duration_words(1500, DurationUnit::Second, false),
            "1.5 seconds"
        );
        assert_eq!(duration_words(250, DurationUnit::Ms, true), "250 ms");
        assert_eq!(friendly_name("token_bucket"), "Token bucket");
        assert_eq!(
            friendly_name("open"),
            "Fail open: grant when Redis is unreachable"
        );
    }

    #[test]
    fn times_read_relative() {
        assert_eq!(ago(1_000, 30_000).relative, "just now");
        let five = ago(0, 5 * 60_000);
        assert_eq!(five.relative, "5 min ago");
        assert_eq!(
            five.to_string(),
            "<time datetime=\"1970-01-01T00:00:00Z\" title=\"1970-01-01 00:00:00 UTC\">5 min ago</time>"
        );
        assert_eq!(url_encode("/apps/a b?x=1"), "/apps/a%20b%3Fx%3D1");
    }
}
