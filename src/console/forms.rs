//! Validation errors of a form, by field, so a template can put each next to its input.

use crate::domain::{FieldErrors, place_in_words};

#[derive(Debug, Default)]
pub struct FormErrors {
    by_field: Vec<(String, String)>,
    /// Errors that belong to no one field (a conflict, a stale version).
    pub general: Vec<String>,
}

impl FormErrors {
    pub fn from_fields(errors: &FieldErrors) -> Self {
        let by_field = errors
            .0
            .iter()
            .map(|e| {
                // "allowed_apps[2]" belongs to the allowed_apps input, and is its third item.
                let field = e.field.split('[').next().unwrap_or(&e.field).to_owned();
                let message = if field == e.field {
                    e.message.clone()
                } else {
                    format!("{}: {}", place_in_words(&e.field), e.message)
                };
                (field, message)
            })
            .collect();
        Self {
            by_field,
            general: Vec::new(),
        }
    }

    pub fn general(message: impl Into<String>) -> Self {
        Self {
            by_field: Vec::new(),
            general: vec![message.into()],
        }
    }

    /// Whether there is no error at all.
    pub fn is_empty(&self) -> bool {
        self.by_field.is_empty() && self.general.is_empty()
    }

    /// The messages for one field, joined.
    pub fn get(&self, field: &str) -> Option<String> {
        let messages: Vec<&str> = self
            .by_field
            .iter()
            .filter(|(f, _)| f == field)
            .map(|(_, m)| m.as_str())
            .collect();
        (!messages.is_empty()).then(|| messages.join("; "))
    }

    /// Errors for fields the form does not show (so none is ever lost).
    pub fn others(&self, shown: &[&str]) -> Vec<String> {
        self.by_field
            .iter()
            .filter(|(f, _)| !shown.contains(&f.as_str()))
            .map(|(f, m)| format!("{f}: {m}"))
            .chain(self.general.iter().cloned())
            .collect()
    }
}

/// A `datetime-local` field's value ("2030-01-31T18:00", read as UTC: the form says so)
/// as RFC 3339; `None` when left empty. Anything else is passed on as typed, for the
/// control layer to refuse naming the field.
pub fn utc_date_time(value: &str) -> Option<String> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|format| chrono::NaiveDateTime::parse_from_str(value, format).ok())
        .map(|t| {
            t.and_utc()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
        .or_else(|| Some(value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_date_time_is_read_as_utc() {
        assert_eq!(
            utc_date_time("2030-01-31T18:00").as_deref(),
            Some("2030-01-31T18:00:00Z")
        );
        assert_eq!(utc_date_time(" "), None);
        assert_eq!(utc_date_time("soon").as_deref(), Some("soon"));
    }

    #[test]
    fn an_item_of_a_list_is_counted_from_one() {
        let mut errors = FieldErrors::default();
        errors.push("allowed_apps[2]", "no such application");
        errors.push("rate", "must be positive");
        let form = FormErrors::from_fields(&errors);
        assert_eq!(
            form.get("allowed_apps").as_deref(),
            Some("allowed_apps item 3: no such application")
        );
        assert_eq!(form.get("rate").as_deref(), Some("must be positive"));
    }
}
