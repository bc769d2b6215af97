//! A policy's fields as a file writes them: how a plan shows what a file changes (the
//! diff itself is the control layer's, `control::field_changes`).

use serde_json::Value;

use crate::control::PolicyView;
use crate::domain::PolicySpec;
use crate::store::PolicyRecord;

use super::render::file_policy;

/// A policy's fields in the order a file writes them (`name` and the owner never differ).
const FIELDS: [&str; 13] = [
    "algorithm",
    "rate",
    "max_permits",
    "window",
    "lease",
    "scope",
    "allowed_apps",
    "failure_mode",
    "enabled",
    "mode",
    "description",
    "overrides",
    "descriptors",
];

/// A spec's fields as a file writes them, in the file's order (`name` and the owner,
/// which never differ in a plan, left out): how a plan shows a file's changes.
pub fn written_fields(spec: &PolicySpec) -> Vec<(&'static str, Option<Value>)> {
    let record = PolicyRecord {
        id: String::new(),
        spec: spec.clone(),
        version: 0,
        created_ms: 0,
        updated_ms: 0,
    };
    let Ok(Value::Object(mut map)) = serde_json::to_value(file_policy(&PolicyView::from(&record)))
    else {
        return Vec::new();
    };
    FIELDS
        .iter()
        .map(|name| (*name, map.remove(*name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::field_changes;
    use crate::policy_file::parse;

    fn spec(text: &str) -> PolicySpec {
        parse(&format!("app: shop\npolicies:\n  - name: a\n{text}"))
            .unwrap()
            .remove(0)
    }

    #[test]
    fn only_the_changed_fields_in_the_files_units() {
        let current = spec("    rate: 1/s\n    max_permits: 5\n");
        let wanted = spec("    rate: 120/min\n    max_permits: 5\n    enabled: false\n");
        let changes = field_changes(&current, &wanted, written_fields);
        let shown: Vec<(String, String, String)> = changes
            .iter()
            .map(|c| {
                (
                    c.field.clone(),
                    c.before.as_ref().unwrap().to_string(),
                    c.after.as_ref().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("rate".into(), "\"60/min\"".into(), "\"120/min\"".into()),
                ("enabled".into(), "true".into(), "false".into()),
            ]
        );
        assert!(field_changes(&current, &current, written_fields).is_empty());
        let unit_only = field_changes(
            &current,
            &spec("    rate: 60/min\n    max_permits: 5\n"),
            written_fields,
        );
        assert_eq!(unit_only.len(), 1);
        assert_eq!(unit_only[0].before, Some(Value::from("1/s")));
        assert_eq!(unit_only[0].after, Some(Value::from("60/min")));
    }
}
