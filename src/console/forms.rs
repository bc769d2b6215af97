//! Validation errors of a form, by field, so a template can put each next to its input.

use crate::domain::FieldErrors;

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
                // "allowed_apps[2]" belongs to the allowed_apps input.
                let field = e.field.split('[').next().unwrap_or(&e.field).to_owned();
                let message = if field == e.field {
                    e.message.clone()
                } else {
                    format!("{}: {}", e.field, e.message)
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
