//! The policy form as a browser sends it: text as typed, parsed here so that a bad
//! number is an error next to its field like any other, then handed to `control`.

use secrecy::SecretString;
use serde::Deserialize;

use crate::console::format::{number, rate_in_unit, unit_seconds};
use crate::control::{PolicyInput, PolicyView};
use crate::domain::{FieldError, FieldErrors};

use super::overrides_text;

/// What the policy form sends: text as typed, parsed here so that a bad number is an
/// error next to its field like any other.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PolicyForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub algorithm: String,
    #[serde(default)]
    pub rate: String,
    #[serde(default)]
    pub rate_unit: String,
    #[serde(default)]
    pub max_permits: String,
    #[serde(default)]
    pub window_ms: String,
    #[serde(default)]
    pub lease_ttl_ms: String,
    #[serde(default)]
    pub allowed_apps: String,
    #[serde(default)]
    pub failure_mode: String,
    /// A checkbox: present when checked.
    pub enabled: Option<String>,
    #[serde(default)]
    pub description: String,
    /// `global`, `per_app` or `per_key`; not sent: unchanged (a new policy's is global).
    pub scope: Option<String>,
    /// One override per line (see `overrides_text`); not sent (a form of an older page,
    /// a script): unchanged, never read as "none".
    pub overrides: Option<String>,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub csrf: SecretString,
}

impl PolicyForm {
    pub fn blank(owner_app: &str) -> Self {
        Self {
            algorithm: "token_bucket".to_owned(),
            rate_unit: "second".to_owned(),
            allowed_apps: owner_app.to_owned(),
            failure_mode: "closed".to_owned(),
            enabled: Some("on".to_owned()),
            scope: Some("global".to_owned()),
            overrides: Some(String::new()),
            ..Self::default()
        }
    }

    pub fn of(policy: &PolicyView) -> Self {
        let (rate, rate_unit) = match policy.rate.map(rate_in_unit) {
            Some((amount, unit)) if amount.fract() == 0.0 => (number(amount), unit),
            Some((amount, unit)) => (amount.to_string(), unit),
            None => (String::new(), "second"),
        };
        let text = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
        Self {
            name: policy.name.clone(),
            algorithm: policy.algorithm.as_str().to_owned(),
            rate,
            rate_unit: rate_unit.to_owned(),
            max_permits: policy.max_permits.to_string(),
            window_ms: text(policy.window_ms),
            lease_ttl_ms: text(policy.lease_ttl_ms),
            allowed_apps: policy.allowed_apps.join(", "),
            failure_mode: policy.failure_mode.as_str().to_owned(),
            enabled: policy.enabled.then(|| "on".to_owned()),
            description: policy.description.clone(),
            scope: Some(policy.scope.as_str().to_owned()),
            overrides: Some(overrides_text::render(&policy.overrides)),
            version: policy.version.to_string(),
            csrf: SecretString::default(),
        }
    }

    /// The input for `control`, or the errors of the fields that are not even numbers.
    /// A field left empty is not sent (the form hides the fields the chosen algorithm
    /// does not use; `control` refuses any that is sent anyway, naming it). On an edit, the
    /// rate is only sent when it really changed: the form shows it rounded to its unit,
    /// and re-sending that would nudge the stored value.
    pub fn to_input(&self, current: Option<&PolicyView>) -> Result<PolicyInput, FieldErrors> {
        let mut errors = FieldErrors::default();
        let rate = match (self.rate.trim(), unit_seconds(&self.rate_unit)) {
            ("", _) => None,
            (_, None) => {
                errors.push("rate_unit", "must be second, minute, hour or day");
                None
            }
            (amount, Some(seconds)) => match amount.parse::<f64>() {
                Ok(amount) if amount.is_finite() => Some(amount / seconds),
                _ => {
                    errors.push("rate", "must be a number, such as 10 or 0.5");
                    None
                }
            },
        };
        let rate = match (rate, current.and_then(|c| c.rate)) {
            (Some(new), Some(cur)) if ((new - cur) / cur).abs() < 1e-6 => None,
            (rate, _) => rate,
        };
        let mut whole = |field: &str, text: &str, example: &str| -> Option<i64> {
            match text.trim() {
                "" => None,
                t => t.parse::<i64>().map_or_else(
                    |_| {
                        errors.push(field, format!("must be a whole number, such as {example}"));
                        None
                    },
                    Some,
                ),
            }
        };
        let max_permits = whole("max_permits", &self.max_permits, "10");
        let window_ms = whole("window_ms", &self.window_ms, "1000");
        let lease_ttl_ms = whole("lease_ttl_ms", &self.lease_ttl_ms, "30000");
        let version = match current.map(|_| self.version.trim().parse::<i64>()) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(_)) => {
                errors.push("version", "is missing; reload the page");
                None
            }
        };
        let overrides = match self.overrides.as_deref().map(overrides_text::parse) {
            None => None,
            Some(Ok(lines)) => Some(lines.into_iter().map(|(_, o)| o).collect()),
            Some(Err(bad)) => {
                for e in bad {
                    errors.push("overrides", format!("line {}: {}", e.line, e.message));
                }
                None
            }
        };
        errors.clone().into_result()?;
        let allowed_apps = self
            .allowed_apps
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(PolicyInput {
            name: current.is_none().then(|| self.name.trim().to_owned()),
            owner_app: None,
            algorithm: Some(self.algorithm.clone()),
            rate,
            max_permits,
            window_ms,
            lease_ttl_ms,
            allowed_apps: Some(allowed_apps),
            failure_mode: Some(self.failure_mode.clone()),
            enabled: Some(self.enabled.is_some()),
            // Browsers send line breaks as CRLF; store them as typed.
            description: Some(self.description.replace("\r\n", "\n")),
            scope: self.scope.clone().filter(|s| !s.is_empty()),
            // The text area holds the whole list: an emptied one means no overrides.
            overrides,
            version,
        })
    }

    /// `control`'s errors with each override's named by its line in the text area
    /// (`overrides[2].rate` is "line 4: rate ..."), all next to that text area.
    pub fn locate_override_errors(&self, errors: FieldErrors) -> FieldErrors {
        let lines: Vec<usize> = overrides_text::parse(self.overrides.as_deref().unwrap_or(""))
            .map(|parsed| parsed.into_iter().map(|(line, _)| line).collect())
            .unwrap_or_default();
        FieldErrors(
            errors
                .0
                .into_iter()
                .map(|e| match override_index(&e.field) {
                    Some((i, part)) => {
                        let line = lines.get(i).map_or(i + 1, |l| *l);
                        let what = part.map_or(String::new(), |p| format!("{p} "));
                        FieldError::new("overrides", format!("line {line}: {what}{}", e.message))
                    }
                    None => e,
                })
                .collect(),
        )
    }
}

/// `overrides[3].rate` as (3, Some("rate")), `overrides[3]` as (3, None).
fn override_index(field: &str) -> Option<(usize, Option<&str>)> {
    let rest = field.strip_prefix("overrides[")?;
    let (index, part) = rest.split_once(']')?;
    let index = index.parse().ok()?;
    Some((index, part.strip_prefix('.')))
}
