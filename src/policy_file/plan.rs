//! What changes between a stored policy and the policy a file describes, field by field,
//! as the file writes it: the `update` lines of a plan.

use serde::Serialize;
use serde_json::Value;

use crate::control::PolicyView;
use crate::domain::PolicySpec;
use crate::store::PolicyRecord;

use super::render::file_policy;

/// One field a plan changes, in the file's terms (`rate: 100/min`, `window: 30s`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FieldChange {
    pub field: String,
    /// Absent when the stored policy has no such field.
    pub before: Option<Value>,
    /// Absent when the file's policy has no such field.
    pub after: Option<Value>,
}

/// The fields `wanted` changes in `current`, in the file's field order. The value before
/// is written in the file's units, so that like is compared with like; a change of unit
/// alone (`1/s` to `60/min`) shows the stored policy's own unit before.
pub fn field_changes(current: &PolicySpec, wanted: &PolicySpec) -> Vec<FieldChange> {
    let after = fields(wanted);
    let own = fields(current);
    let in_file_units = fields(&PolicySpec {
        units: wanted.units,
        ..current.clone()
    });
    FIELDS
        .iter()
        .map(|name| (*name).to_owned())
        .filter(|name| own.get(name) != after.get(name))
        .map(|name| {
            let before = match in_file_units.get(&name) {
                Some(v) if after.get(&name) != Some(v) => Some(v.clone()),
                _ => own.get(&name).cloned(),
            };
            FieldChange {
                before,
                after: after.get(&name).cloned(),
                field: name,
            }
        })
        .collect()
}

/// A policy's fields in the order a file writes them (`name` and the owner never differ).
const FIELDS: [&str; 12] = [
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
];

/// A spec's fields as a file writes them.
fn fields(spec: &PolicySpec) -> serde_json::Map<String, Value> {
    let record = PolicyRecord {
        id: String::new(),
        spec: spec.clone(),
        version: 0,
        created_ms: 0,
        updated_ms: 0,
    };
    match serde_json::to_value(file_policy(&PolicyView::from(&record))) {
        Ok(Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let changes = field_changes(&current, &wanted);
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
        assert!(field_changes(&current, &current).is_empty());
        let unit_only = field_changes(&current, &spec("    rate: 60/min\n    max_permits: 5\n"));
        assert_eq!(unit_only.len(), 1);
        assert_eq!(unit_only[0].before, Some(Value::from("1/s")));
        assert_eq!(unit_only[0].after, Some(Value::from("60/min")));
    }
}
