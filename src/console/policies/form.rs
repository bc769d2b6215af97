//! The policy form as a browser sends it: text as typed, parsed here so that a bad
//! number is an error next to its field like any other, then handed to `control`.

use secrecy::SecretString;
use serde::Deserialize;

use crate::console::format::{amount, rate_unit_of};
use crate::control::{PolicyInput, PolicyView};
use crate::domain::{DisplayUnits, DurationUnit, FieldError, FieldErrors, MAX_CAPACITY};

use super::{amounts, descriptors_text, overrides_text};

/// What the policy form sends: text as typed, parsed here so that a bad number is an
/// error next to its field like any other. Read with `HtmlForm`: `allowed_apps` is one
/// checkbox per application, so the field repeats.
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
    /// The window's amount, in `window_unit`.
    #[serde(default)]
    pub window: String,
    #[serde(default)]
    pub window_unit: String,
    /// A lease's longest life, in `lease_ttl_unit`.
    #[serde(default)]
    pub lease_ttl: String,
    #[serde(default)]
    pub lease_ttl_unit: String,
    /// The slugs checked; a value may also list several, separated by commas or spaces
    /// (as the text box of earlier pages sent them).
    #[serde(default)]
    pub allowed_apps: Vec<String>,
    #[serde(default)]
    pub failure_mode: String,
    /// A checkbox: present when checked.
    pub enabled: Option<String>,
    /// `enforce` or `shadow`; not sent (a form of an older page): unchanged.
    pub mode: Option<String>,
    #[serde(default)]
    pub description: String,
    /// `global`, `per_app` or `per_key`; not sent: unchanged (a new policy's is global).
    pub scope: Option<String>,
    /// One override per line (see `overrides_text`); not sent (a form of an older page,
    /// a script): unchanged, never read as "none".
    pub overrides: Option<String>,
    /// One descriptor pattern per line (see `descriptors_text`); not sent: unchanged.
    pub descriptors: Option<String>,
    #[serde(default)]
    pub version: String,
    /// After an edit collided with another: per field both changed, whose value to
    /// keep ("rate:theirs", "rate:yours", "rate:" when not chosen; see `merge`).
    #[serde(default)]
    pub keep: Vec<String>,
    #[serde(default)]
    pub csrf: SecretString,
}

/// The form's names for the fields `control` names otherwise (its durations are in ms).
const FIELD_NAMES: [(&str, &str); 2] = [("window_ms", "window"), ("lease_ttl_ms", "lease_ttl")];

impl PolicyForm {
    pub fn blank(owner_app: &str) -> Self {
        Self {
            algorithm: "token_bucket".to_owned(),
            rate_unit: "second".to_owned(),
            window_unit: "second".to_owned(),
            lease_ttl_unit: "second".to_owned(),
            allowed_apps: vec![owner_app.to_owned()],
            failure_mode: "closed".to_owned(),
            enabled: Some("on".to_owned()),
            mode: Some("enforce".to_owned()),
            scope: Some("global".to_owned()),
            overrides: Some(String::new()),
            descriptors: Some(String::new()),
            ..Self::default()
        }
    }

    /// The policy as its form shows it: each number in the unit it was entered in (or,
    /// for a policy made through the JSON API, the unit it reads best in).
    pub fn of(policy: &PolicyView) -> Self {
        let (rate, rate_unit) = match policy.rate {
            Some(r) => {
                let unit = rate_unit_of(r, policy.rate_unit);
                (amount(r * unit.seconds()), unit.as_str())
            }
            None => (String::new(), "second"),
        };
        let duration = |ms: Option<i64>, chosen: Option<DurationUnit>| match ms {
            Some(ms) => {
                let unit = chosen.unwrap_or_else(|| DurationUnit::largest_whole(ms));
                (
                    amount(ms as f64 / unit.millis() as f64),
                    unit.as_str().to_owned(),
                )
            }
            None => (String::new(), "second".to_owned()),
        };
        let (window, window_unit) = duration(policy.window_ms, policy.window_unit);
        let (lease_ttl, lease_ttl_unit) = duration(policy.lease_ttl_ms, policy.lease_ttl_unit);
        Self {
            name: policy.name.clone(),
            algorithm: policy.algorithm.as_str().to_owned(),
            rate,
            rate_unit: rate_unit.to_owned(),
            max_permits: policy.max_permits.to_string(),
            window,
            window_unit,
            lease_ttl,
            lease_ttl_unit,
            allowed_apps: policy.allowed_apps.clone(),
            failure_mode: policy.failure_mode.as_str().to_owned(),
            enabled: policy.enabled.then(|| "on".to_owned()),
            mode: Some(policy.mode.as_str().to_owned()),
            description: policy.description.clone(),
            scope: Some(policy.scope.as_str().to_owned()),
            overrides: Some(overrides_text::render(&policy.overrides)),
            descriptors: Some(descriptors_text::render(&policy.descriptors)),
            version: policy.version.to_string(),
            keep: Vec::new(),
            csrf: SecretString::default(),
        }
    }

    /// The slugs checked, each once, in the order sent.
    pub fn allowed_slugs(&self) -> Vec<String> {
        let mut slugs: Vec<String> = Vec::new();
        for slug in self
            .allowed_apps
            .iter()
            .flat_map(|v| v.split(|c: char| c == ',' || c.is_whitespace()))
            .filter(|s| !s.is_empty())
        {
            if !slugs.iter().any(|s| s == slug) {
                slugs.push(slug.to_owned());
            }
        }
        slugs
    }

    /// The input for `control`, and the errors of the fields the form could not read (a
    /// number that is none, or out of range in its unit): those fields are left out of
    /// the input, so that `control` can still be asked about all the others.
    ///
    /// A field left empty is not sent (the form hides the fields the chosen algorithm
    /// does not use; `control` refuses any that is sent anyway, naming it). On an edit,
    /// the rate is only sent when it really changed: the form shows it rounded to its
    /// unit, and re-sending that would nudge the stored value.
    pub fn to_input(&self, current: Option<&PolicyView>) -> PolicyInput {
        let mut errors = FieldErrors::default();
        let rate = amounts::rate(&mut errors, &self.rate, &self.rate_unit);
        let window = amounts::duration(&mut errors, "window_ms", &self.window, &self.window_unit);
        let lease_ttl = amounts::duration(
            &mut errors,
            "lease_ttl_ms",
            &self.lease_ttl,
            &self.lease_ttl_unit,
        );
        let mut units = DisplayUnits {
            rate: crate::domain::RateUnit::parse_field("", &self.rate_unit).ok(),
            window: DurationUnit::parse_field("", &self.window_unit).ok(),
            lease_ttl: DurationUnit::parse_field("", &self.lease_ttl_unit).ok(),
        };
        let rate = match (rate, current.and_then(|c| c.rate)) {
            (Some((new, _)), Some(cur)) if ((new - cur) / cur).abs() < 1e-6 => None,
            (rate, _) => rate.map(|(r, _)| r),
        };
        // A number left as the form showed it keeps the unit it was stored with (none,
        // for a policy made through the JSON API), so that saving another field changes
        // nothing else.
        if let Some(current) = current {
            let shown = Self::of(current);
            if rate.is_none() && self.rate_unit == shown.rate_unit {
                units.rate = current.rate_unit;
            }
            if window.map(|(ms, _)| ms) == current.window_ms
                && self.window_unit == shown.window_unit
            {
                units.window = current.window_unit;
            }
            if lease_ttl.map(|(ms, _)| ms) == current.lease_ttl_ms
                && self.lease_ttl_unit == shown.lease_ttl_unit
            {
                units.lease_ttl = current.lease_ttl_unit;
            }
        }
        let max_permits = amounts::whole(
            &mut errors,
            "max_permits",
            &self.max_permits,
            MAX_CAPACITY,
            "10",
        );
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
        PolicyInput {
            name: current.is_none().then(|| self.name.trim().to_owned()),
            owner_app: None,
            algorithm: Some(self.algorithm.clone()),
            rate,
            max_permits,
            window_ms: window.map(|(ms, _)| ms),
            lease_ttl_ms: lease_ttl.map(|(ms, _)| ms),
            allowed_apps: Some(self.allowed_slugs()),
            failure_mode: Some(self.failure_mode.clone()),
            enabled: Some(self.enabled.is_some()),
            mode: self.mode.clone().filter(|m| !m.is_empty()),
            // Browsers send line breaks as CRLF; store them as typed.
            description: Some(self.description.replace("\r\n", "\n")),
            scope: self.scope.clone().filter(|s| !s.is_empty()),
            // The text area holds the whole list: an emptied one means no overrides.
            overrides,
            // The same: an emptied text area means no patterns.
            descriptors: self.descriptors.as_deref().map(|text| {
                descriptors_text::parse(text)
                    .into_iter()
                    .map(|(_, d)| d)
                    .collect()
            }),
            version,
            units: Some(units),
            // What the form could not read goes to `control` with the rest, which reports
            // it with the other fields' errors (under its own names: `window_ms`).
            unreadable: errors,
        }
    }

    /// `control`'s errors under the names of the form's fields, overrides and descriptor
    /// patterns by line.
    pub fn in_form_terms(&self, errors: FieldErrors) -> FieldErrors {
        let errors = self.locate_override_errors(errors);
        let errors =
            descriptors_text::locate_errors(self.descriptors.as_deref().unwrap_or(""), errors);
        FieldErrors(
            errors
                .0
                .into_iter()
                .map(|mut e| {
                    if let Some((_, ours)) = FIELD_NAMES.iter().find(|(c, _)| *c == e.field) {
                        e.field = (*ours).to_owned();
                    }
                    e
                })
                .collect(),
        )
    }

    /// `control`'s errors with each override's named by its line in the text area
    /// (`overrides[2].rate` is "line 4: rate ..."), all next to that text area.
    fn locate_override_errors(&self, errors: FieldErrors) -> FieldErrors {
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
