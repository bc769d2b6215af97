//! A policy's overrides as the form's text area holds them: one per line, the caller it
//! matches, then the limits it changes:
//!
//! ```text
//! acme-premium max_permits=500 rate=100/second
//! "key with a trailing space " max_permits=1
//! ```
//!
//! The limits are the trailing `name=value` words; everything before them is the match.
//! A match that would not read back as itself (surrounding spaces, a leading quote, a last
//! word that looks like a limit) is written as a JSON string, so every stored override
//! survives a round trip through the form unchanged.

use crate::console::format::{rate_in_unit, unit_seconds};
use crate::control::{OverrideInput, OverrideView};

/// The limits a line may set, in the order they are written.
const LIMITS: [&str; 4] = ["max_permits", "rate", "window_ms", "lease_ttl_ms"];

/// One line that could not be read: its number (from 1) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub message: String,
}

/// The overrides written in `text`, each with the number of its line (blank lines are
/// skipped), or every line's error.
pub fn parse(text: &str) -> Result<Vec<(usize, OverrideInput)>, Vec<LineError>> {
    let mut parsed = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line) {
            Ok(o) => parsed.push((i + 1, o)),
            Err(message) => errors.push(LineError {
                line: i + 1,
                message,
            }),
        }
    }
    if errors.is_empty() {
        Ok(parsed)
    } else {
        Err(errors)
    }
}

/// The overrides as the text area shows them, one per line.
pub fn render(overrides: &[OverrideView]) -> String {
    overrides
        .iter()
        .map(render_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn render_line(o: &OverrideView) -> String {
    let mut limits = Vec::new();
    if let Some(m) = o.max_permits {
        limits.push(format!("max_permits={m}"));
    }
    if let Some(r) = o.rate {
        limits.push(format!("rate={}", render_rate(r)));
    }
    if let Some(w) = o.window_ms {
        limits.push(format!("window_ms={w}"));
    }
    if let Some(l) = o.lease_ttl_ms {
        limits.push(format!("lease_ttl_ms={l}"));
    }
    let limits = limits.join(" ");
    let plain = format!("{} {limits}", o.matches);
    let reads_back = parse_line(&plain).is_ok_and(|p| p.matches.as_deref() == Some(&o.matches));
    if reads_back {
        plain
    } else {
        let quoted = serde_json::to_string(&o.matches).expect("a string serializes");
        format!("{quoted} {limits}")
    }
}

/// A rate per second as the text area writes it: in the unit the rest of the console
/// uses when that is exact ("600/minute"), else per second with every digit it needs.
fn render_rate(per_second: f64) -> String {
    let (amount, unit) = rate_in_unit(per_second);
    let seconds = unit_seconds(unit).expect("a known unit");
    let whole = amount.round();
    if whole >= 1.0 && whole / seconds == per_second {
        format!("{whole}/{unit}")
    } else {
        per_second.to_string()
    }
}

fn parse_line(line: &str) -> Result<OverrideInput, String> {
    let mut input = OverrideInput::default();
    let line = line.trim();
    if line.starts_with('"') {
        // A quoted match, then nothing but limits.
        let mut quoted = serde_json::Deserializer::from_str(line).into_iter::<String>();
        let Some(Ok(matches)) = quoted.next() else {
            return Err(
                "has a match in quotes that is not a JSON string (escape a quote inside as \\\")"
                    .to_owned(),
            );
        };
        let limits = &line[quoted.byte_offset()..];
        if !limits.is_empty() && !limits.starts_with(char::is_whitespace) {
            return Err("needs a space after the quoted match".to_owned());
        }
        for word in limits.split_whitespace() {
            let (name, value) = limit_word(word)
                .ok_or_else(|| format!("has {word:?} after the match, which is not a limit"))?;
            set_limit(&mut input, name, value)?;
        }
        input.matches = Some(matches);
        return Ok(input);
    }
    // The limits are the trailing `name=value` words, read from the right.
    let mut rest = line;
    while let Some((head, word)) = rest.rsplit_once(char::is_whitespace) {
        let Some((name, value)) = limit_word(word) else {
            break;
        };
        set_limit(&mut input, name, value)?;
        rest = head.trim_end();
    }
    if limit_word(rest).is_some() {
        return Err("starts with no match: write the key or app first, then its limits".to_owned());
    }
    input.matches = Some(rest.to_owned());
    Ok(input)
}

/// `name=value` where `name` is a lowercase word: a limit, known or not (an unknown one is
/// an error, never silently part of the match).
fn limit_word(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    let is_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    is_name.then_some((name, value))
}

fn set_limit(input: &mut OverrideInput, name: &str, value: &str) -> Result<(), String> {
    let twice = || format!("sets {name} twice");
    let whole = |value: &str| {
        value
            .parse::<i64>()
            .map_err(|_| format!("{name} must be a whole number, such as {name}=10"))
    };
    let slot = match name {
        "max_permits" => &mut input.max_permits,
        "window_ms" => &mut input.window_ms,
        "lease_ttl_ms" => &mut input.lease_ttl_ms,
        "rate" => {
            if input.rate.is_some() {
                return Err(twice());
            }
            input.rate = Some(parse_rate(value)?);
            return Ok(());
        }
        _ => {
            return Err(format!(
                "has an unknown limit {name:?}: the limits are {}",
                LIMITS.join(", ")
            ));
        }
    };
    if slot.is_some() {
        return Err(twice());
    }
    *slot = Some(whole(value)?);
    Ok(())
}

/// `10` (per second), `10/second`, `600/minute`, `5/hour` or `100/day`.
fn parse_rate(value: &str) -> Result<f64, String> {
    let bad = || {
        "rate must be a number per second or per unit, such as rate=10 or rate=600/minute"
            .to_owned()
    };
    let (amount, seconds) = match value.split_once('/') {
        None => (value, 1.0),
        Some((amount, unit)) => (amount, unit_seconds(unit).ok_or_else(bad)?),
    };
    match amount.parse::<f64>() {
        Ok(a) if a.is_finite() => Ok(a / seconds),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(matches: &str) -> OverrideView {
        OverrideView {
            matches: matches.to_owned(),
            max_permits: Some(5),
            rate: Some(0.2),
            window_ms: None,
            lease_ttl_ms: None,
        }
    }

    #[test]
    fn a_line_is_a_match_then_its_limits() {
        let parsed = parse("acme max_permits=500 rate=600/minute\n\n  b2 window_ms=1000 ").unwrap();
        assert_eq!(parsed.len(), 2);
        let (line, acme) = &parsed[0];
        assert_eq!(*line, 1);
        assert_eq!(acme.matches.as_deref(), Some("acme"));
        assert_eq!(acme.max_permits, Some(500));
        assert_eq!(acme.rate, Some(10.0));
        let (line, b2) = &parsed[1];
        assert_eq!(*line, 3);
        assert_eq!(b2.window_ms, Some(1000));
    }

    #[test]
    fn every_stored_match_reads_back_as_itself() {
        for matches in [
            "plain",
            "user 42",
            "  padded  ",
            "\"quoted\"",
            "ends rate=5",
            "a=b",
            "x   y",
            "émoji ✓",
            "rate=5",
            "a b=c",
            "say \"hi\" max_permits=1",
        ] {
            let o = view(matches);
            let text = render(std::slice::from_ref(&o));
            let (_, back) = parse(&text).unwrap().pop().unwrap();
            assert_eq!(back.matches.as_deref(), Some(matches), "{text}");
            assert_eq!(back.max_permits, Some(5));
            assert_eq!(back.rate, Some(0.2), "{text}");
        }
    }

    #[test]
    fn rates_read_back_exactly() {
        for rate in [0.2, 1.0 / 3.0, 10.0, 0.1 + 0.2, 1e-5, 123.456] {
            let text = render_rate(rate);
            assert_eq!(parse_rate(&text).unwrap(), rate, "{text}");
        }
        assert_eq!(render_rate(0.2), "12/minute");
    }

    #[test]
    fn bad_lines_are_named() {
        let errors = parse("ok max_permits=1\nmax_permits=3\nk burst=5\nk rate=fast\nk max_permits=1 max_permits=2\n\"open max_permits=1")
            .unwrap_err();
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6]);
        assert!(errors[1].message.contains("unknown limit \"burst\""));
        assert!(errors[3].message.contains("twice"));
    }
}
