//! An edit that came second, merged with the one that came first: the fields the user
//! changed (against the version the form started from) go onto the policy as it is now,
//! unless the other change touched the same field differently; such a field is a
//! collision, and the user chooses whose value to keep. A field compares by what it
//! means, not how it is written: allowed applications as a set, a rate per second, a
//! duration in ms, text areas without the browser's CRLF.

use crate::console::format::friendly_name;
use crate::domain::{DurationUnit, RateUnit};

use super::form::PolicyForm;

/// A field of the form as a user changes it (a number with its unit is one part).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Algorithm,
    Rate,
    MaxPermits,
    Window,
    LeaseTtl,
    AllowedApps,
    Scope,
    Overrides,
    Descriptors,
    FailureMode,
    Mode,
    Enabled,
    Description,
}

/// Whose value a collision keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Theirs,
    Yours,
}

/// A field both edits changed, to different values: each side as the form shows it.
#[derive(Debug, Clone)]
pub struct Collision {
    pub part: Part,
    pub theirs: String,
    pub yours: String,
}

/// What merging an edit with the change it missed comes to.
pub struct Merged {
    /// The policy as it is now, with the user's changes on it (for a collision, the
    /// user's value: shown until they choose), at the current version.
    pub form: PolicyForm,
    /// The parts the user changed.
    pub yours: Vec<Part>,
    /// The parts the other change changed.
    pub theirs: Vec<Part>,
    pub collisions: Vec<Collision>,
}

impl Part {
    pub const ALL: [Part; 13] = [
        Part::Algorithm,
        Part::Rate,
        Part::MaxPermits,
        Part::Window,
        Part::LeaseTtl,
        Part::AllowedApps,
        Part::Scope,
        Part::Overrides,
        Part::Descriptors,
        Part::FailureMode,
        Part::Mode,
        Part::Enabled,
        Part::Description,
    ];

    /// The id of the form's input for the part, which names it in a choice.
    pub fn field(self) -> &'static str {
        match self {
            Part::Algorithm => "algorithm",
            Part::Rate => "rate",
            Part::MaxPermits => "max_permits",
            Part::Window => "window",
            Part::LeaseTtl => "lease_ttl",
            Part::AllowedApps => "allowed_apps",
            Part::Scope => "scope",
            Part::Overrides => "overrides",
            Part::Descriptors => "descriptors",
            Part::FailureMode => "failure_mode",
            Part::Mode => "mode",
            Part::Enabled => "enabled",
            Part::Description => "description",
        }
    }

    /// The part in a sentence: "the rate".
    pub fn label(self) -> &'static str {
        match self {
            Part::Algorithm => "algorithm",
            Part::Rate => "rate",
            Part::MaxPermits => "max permits",
            Part::Window => "window",
            Part::LeaseTtl => "lease lifetime",
            Part::AllowedApps => "allowed applications",
            Part::Scope => "whose bucket",
            Part::Overrides => "overrides",
            Part::Descriptors => "descriptor patterns",
            Part::FailureMode => "failure mode",
            Part::Mode => "mode",
            Part::Enabled => "enabled",
            Part::Description => "description",
        }
    }

    fn named(field: &str) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.field() == field)
    }

    /// Whether `to` holds another value of the part than `from`. A part `to` does not
    /// send (a form of an older page) is unchanged.
    pub fn changed(self, from: &PolicyForm, to: &PolicyForm) -> bool {
        match self {
            Part::Algorithm => from.algorithm.trim() != to.algorithm.trim(),
            Part::Rate => amounts_differ(
                (&from.rate, rate_seconds(&from.rate_unit)),
                (&to.rate, rate_seconds(&to.rate_unit)),
            ),
            Part::MaxPermits => amounts_differ((&from.max_permits, 1.0), (&to.max_permits, 1.0)),
            Part::Window => amounts_differ(
                (&from.window, unit_ms(&from.window_unit)),
                (&to.window, unit_ms(&to.window_unit)),
            ),
            Part::LeaseTtl => amounts_differ(
                (&from.lease_ttl, unit_ms(&from.lease_ttl_unit)),
                (&to.lease_ttl, unit_ms(&to.lease_ttl_unit)),
            ),
            Part::AllowedApps => sorted(from.allowed_slugs()) != sorted(to.allowed_slugs()),
            Part::Scope => sent_differs(&from.scope, &to.scope),
            Part::Overrides => texts_differ(&from.overrides, &to.overrides),
            Part::Descriptors => texts_differ(&from.descriptors, &to.descriptors),
            Part::FailureMode => from.failure_mode.trim() != to.failure_mode.trim(),
            Part::Mode => sent_differs(&from.mode, &to.mode),
            Part::Enabled => from.enabled.is_some() != to.enabled.is_some(),
            Part::Description => texts_differ(
                &Some(from.description.clone()),
                &Some(to.description.clone()),
            ),
        }
    }

    /// Makes `to`'s part `from`'s.
    pub fn copy(self, from: &PolicyForm, to: &mut PolicyForm) {
        match self {
            Part::Algorithm => to.algorithm.clone_from(&from.algorithm),
            Part::Rate => {
                to.rate.clone_from(&from.rate);
                to.rate_unit.clone_from(&from.rate_unit);
            }
            Part::MaxPermits => to.max_permits.clone_from(&from.max_permits),
            Part::Window => {
                to.window.clone_from(&from.window);
                to.window_unit.clone_from(&from.window_unit);
            }
            Part::LeaseTtl => {
                to.lease_ttl.clone_from(&from.lease_ttl);
                to.lease_ttl_unit.clone_from(&from.lease_ttl_unit);
            }
            Part::AllowedApps => to.allowed_apps = from.allowed_slugs(),
            Part::Scope => to.scope.clone_from(&from.scope),
            Part::Overrides => to.overrides.clone_from(&from.overrides),
            Part::Descriptors => to.descriptors.clone_from(&from.descriptors),
            Part::FailureMode => to.failure_mode.clone_from(&from.failure_mode),
            Part::Mode => to.mode.clone_from(&from.mode),
            Part::Enabled => to.enabled.clone_from(&from.enabled),
            Part::Description => to.description.clone_from(&from.description),
        }
    }

    /// The part's value as the form shows it, on one line.
    pub fn shown(self, form: &PolicyForm) -> String {
        let or_none = |s: String| if s.is_empty() { "none".to_owned() } else { s };
        let one_line = |text: &str| {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ")
        };
        match self {
            Part::Algorithm => friendly_name(form.algorithm.trim()).to_owned(),
            Part::Rate if form.rate.trim().is_empty() => "none".to_owned(),
            Part::Rate => format!("{} per {}", form.rate.trim(), form.rate_unit),
            Part::MaxPermits => or_none(form.max_permits.trim().to_owned()),
            Part::Window => with_unit(&form.window, &form.window_unit),
            Part::LeaseTtl => with_unit(&form.lease_ttl, &form.lease_ttl_unit),
            Part::AllowedApps => or_none(sorted(form.allowed_slugs()).join(", ")),
            Part::Scope => friendly_name(form.scope.as_deref().unwrap_or("")).to_owned(),
            Part::Overrides => or_none(one_line(form.overrides.as_deref().unwrap_or(""))),
            Part::Descriptors => or_none(one_line(form.descriptors.as_deref().unwrap_or(""))),
            Part::FailureMode => friendly_name(form.failure_mode.trim()).to_owned(),
            Part::Mode => friendly_name(form.mode.as_deref().unwrap_or("")).to_owned(),
            Part::Enabled if form.enabled.is_some() => "enabled".to_owned(),
            Part::Enabled => "disabled".to_owned(),
            Part::Description => or_none(one_line(&form.description)),
        }
    }
}

/// The user's edit `yours`, which started from `base`, onto `theirs`, the policy as it is
/// now. Without `base` (a version the history no longer has), every part the user holds
/// otherwise than `theirs` is a collision: what they changed cannot be told.
pub fn merge(yours: &PolicyForm, base: Option<&PolicyForm>, theirs: &PolicyForm) -> Merged {
    let mut merged = Merged {
        form: theirs.clone(),
        yours: Vec::new(),
        theirs: Vec::new(),
        collisions: Vec::new(),
    };
    for part in Part::ALL {
        let (you_changed, they_changed) = match base {
            Some(base) => (part.changed(base, yours), part.changed(base, theirs)),
            None => (part.changed(theirs, yours), true),
        };
        if they_changed && base.is_some() {
            merged.theirs.push(part);
        }
        if !you_changed {
            continue;
        }
        merged.yours.push(part);
        part.copy(yours, &mut merged.form);
        if they_changed && part.changed(theirs, yours) {
            merged.collisions.push(Collision {
                part,
                theirs: part.shown(theirs),
                yours: part.shown(yours),
            });
        }
    }
    merged
}

/// The choices a conflict page's `keep` selects sent: "rate:theirs", "rate:yours", or
/// "rate:" when none was made.
pub fn choices(keep: &[String]) -> Vec<(Part, Option<Side>)> {
    keep.iter()
        .filter_map(|value| {
            let (field, side) = value.split_once(':')?;
            let side = match side {
                "theirs" => Some(Side::Theirs),
                "yours" => Some(Side::Yours),
                _ => None,
            };
            Some((Part::named(field)?, side))
        })
        .collect()
}

/// The parts in words: "rate and max permits".
pub fn in_words(parts: &[Part]) -> String {
    let labels: Vec<&str> = parts.iter().map(|p| p.label()).collect();
    match labels.as_slice() {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn sorted(mut slugs: Vec<String>) -> Vec<String> {
    slugs.sort_unstable();
    slugs
}

fn with_unit(amount: &str, unit: &str) -> String {
    let amount = amount.trim();
    if amount.is_empty() {
        return "none".to_owned();
    }
    let unit = match DurationUnit::parse_field("", unit) {
        Ok(DurationUnit::Ms) => "ms",
        Ok(DurationUnit::Second) => "seconds",
        Ok(DurationUnit::Minute) => "minutes",
        Ok(DurationUnit::Hour) => "hours",
        Ok(DurationUnit::Day) => "days",
        Err(_) => unit,
    };
    format!("{amount} {unit}")
}

fn rate_seconds(unit: &str) -> f64 {
    RateUnit::parse_field("", unit).map_or(f64::NAN, |u| u.seconds())
}

fn unit_ms(unit: &str) -> f64 {
    DurationUnit::parse_field("", unit).map_or(f64::NAN, |u| u.millis() as f64)
}

/// Two amounts in their units: equal when both read as the same quantity (`60` per
/// minute is `1` per second), or, when either cannot be read, as the same text.
fn amounts_differ((a, a_unit): (&str, f64), (b, b_unit): (&str, f64)) -> bool {
    let (a, b) = (a.trim(), b.trim());
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) if a_unit.is_finite() && b_unit.is_finite() => {
            let (x, y) = (x / a_unit, y / b_unit);
            (x - y).abs() > 1e-9 * x.abs().max(y.abs())
        }
        _ => a != b,
    }
}

/// A field a form may leave out: left out, it is unchanged.
fn sent_differs(from: &Option<String>, to: &Option<String>) -> bool {
    match to.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => false,
        Some(to) => from.as_deref().map(str::trim) != Some(to),
    }
}

/// Text areas as typed: browsers send CRLF, and trailing space means nothing.
fn texts_differ(from: &Option<String>, to: &Option<String>) -> bool {
    let norm = |s: &str| s.replace("\r\n", "\n").trim_end().to_owned();
    match to {
        None => false,
        Some(to) => from.as_deref().map(norm) != Some(norm(to)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> PolicyForm {
        PolicyForm {
            name: "orders".into(),
            algorithm: "token_bucket".into(),
            rate: "300".into(),
            rate_unit: "second".into(),
            max_permits: "10".into(),
            allowed_apps: vec!["shop".into(), "billing".into()],
            failure_mode: "closed".into(),
            enabled: Some("on".into()),
            mode: Some("enforce".into()),
            scope: Some("global".into()),
            overrides: Some(String::new()),
            descriptors: Some(String::new()),
            version: "1".into(),
            ..PolicyForm::default()
        }
    }

    #[test]
    fn changes_to_different_fields_both_stay() {
        let base = policy();
        let mut theirs = policy();
        theirs.rate = "100".into();
        theirs.version = "2".into();
        let mut yours = policy();
        yours.max_permits = "20".into();
        let merged = merge(&yours, Some(&base), &theirs);
        assert!(merged.collisions.is_empty());
        assert_eq!(
            (merged.form.rate.as_str(), merged.form.max_permits.as_str()),
            ("100", "20")
        );
        assert_eq!(merged.form.version, "2");
        assert_eq!(
            (merged.yours, merged.theirs),
            (vec![Part::MaxPermits], vec![Part::Rate])
        );
    }

    #[test]
    fn a_field_both_changed_differently_collides() {
        let base = policy();
        let mut theirs = policy();
        theirs.rate = "100".into();
        let mut yours = policy();
        yours.rate = "5".into();
        yours.rate_unit = "minute".into();
        let merged = merge(&yours, Some(&base), &theirs);
        let c = &merged.collisions[0];
        assert_eq!(
            (c.part, c.theirs.as_str(), c.yours.as_str()),
            (Part::Rate, "100 per second", "5 per minute")
        );
        assert_eq!(
            merged.form.rate, "5",
            "the form shows the user's value until they choose"
        );
    }

    #[test]
    fn the_same_value_written_differently_is_no_change() {
        let base = policy();
        let mut yours = policy();
        yours.rate = "18000".into();
        yours.rate_unit = "minute".into();
        yours.allowed_apps = vec!["billing".into(), "shop".into()];
        yours.description = "\r\n".into();
        yours.overrides = Some("\r\n".into());
        yours.mode = None;
        assert!(
            Part::ALL.iter().all(|p| !p.changed(&base, &yours)),
            "{yours:?}"
        );
    }

    #[test]
    fn both_making_the_same_change_is_no_collision() {
        let base = policy();
        let mut theirs = policy();
        theirs.enabled = None;
        let mut yours = policy();
        yours.enabled = None;
        assert!(merge(&yours, Some(&base), &theirs).collisions.is_empty());
    }

    #[test]
    fn without_the_base_every_difference_is_asked() {
        let theirs = policy();
        let mut yours = policy();
        yours.max_permits = "20".into();
        let merged = merge(&yours, None, &theirs);
        assert_eq!(merged.collisions.len(), 1);
        assert_eq!(merged.collisions[0].part, Part::MaxPermits);
    }

    #[test]
    fn choices_read_as_sent() {
        let keep = [
            "rate:theirs",
            "max_permits:yours",
            "window:",
            "nonsense:yours",
        ];
        let keep: Vec<String> = keep.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(
            choices(&keep),
            [
                (Part::Rate, Some(Side::Theirs)),
                (Part::MaxPermits, Some(Side::Yours)),
                (Part::Window, None)
            ]
        );
        assert_eq!(
            in_words(&[Part::Rate, Part::MaxPermits, Part::Mode]),
            "rate, max permits and mode"
        );
    }
}
