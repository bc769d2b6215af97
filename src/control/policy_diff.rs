//! What changes between a stored policy and the policy wanted, field by field, in the
//! terms of the source that wants it (a policy file writes `rate: 100/min`, `window:
//! 30s`): the `update` lines of a plan.

use serde::Serialize;
use serde_json::Value;

use crate::domain::PolicySpec;

/// Every field a source writes, in its order, with the policy's value (`None` where it
/// has none).
pub type WrittenFields = fn(&PolicySpec) -> Vec<(&'static str, Option<Value>)>;

/// One field a plan changes, in the source's terms (`rate: 100/min`, `window: 30s`).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FieldChange {
    pub field: String,
    /// Absent when the stored policy has no such field.
    pub before: Option<Value>,
    /// Absent when the wanted policy has no such field.
    pub after: Option<Value>,
}

/// The fields `wanted` changes in `current`, in the order `written` writes them. The
/// value before is written in the wanted policy's units, so that like is compared with
/// like; a change of unit alone (`1/s` to `60/min`) shows the stored policy's own unit.
pub fn field_changes(
    current: &PolicySpec,
    wanted: &PolicySpec,
    written: WrittenFields,
) -> Vec<FieldChange> {
    let after = written(wanted);
    let own = written(current);
    let in_wanted_units = written(&PolicySpec {
        units: wanted.units,
        ..current.clone()
    });
    let value = |fields: &[(&'static str, Option<Value>)], name: &str| {
        fields
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.clone())
    };
    after
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| value(&own, name) != value(&after, name))
        .map(|name| {
            let after = value(&after, name);
            let before = match value(&in_wanted_units, name) {
                Some(v) if after.as_ref() != Some(&v) => Some(v),
                _ => value(&own, name),
            };
            FieldChange {
                field: name.to_owned(),
                before,
                after,
            }
        })
        .collect()
}
