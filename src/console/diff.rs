//! What changed between two states of a thing, field by field, in the words and units the
//! console's forms use ("rate: 100 per minute → 200 per minute", windows in s/min/h), never
//! in the API's units (rates per second, ms). The one place for it: a policy's history and
//! the audit log (page and CSV) both show changes this way.
//!
//! States are JSON objects as the admin API shows them (a policy's `PolicyView`, an audit
//! event's `before`/`after`), so any entity's change reads alike.

use serde_json::{Map, Value};

use super::format::{duration, number, rates_in_one_unit};

/// One field that changed: its label and its value before and after, as words; `None` on
/// one side when the field was added or removed (or the thing created or deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub field: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Change {
    /// The change on one line, for a CSV cell: "rate: 100 per minute → 200 per minute".
    pub fn text(&self) -> String {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => format!("{}: {b} → {a}", self.field),
            (None, Some(a)) => format!("{}: {a}", self.field),
            (Some(b), None) => format!("{}: {b} (removed)", self.field),
            (None, None) => self.field.clone(),
        }
    }
}

/// Bookkeeping that changes with every save and says nothing about what was changed.
const IGNORED: [&str; 5] = [
    "version",
    "created_at",
    "updated_at",
    "restored_version",
    "id",
];

/// A policy's fields in the order of its form, with their labels there; other entities'
/// fields follow in name order, labelled by their name.
const LABELS: [(&str, &str); 15] = [
    ("name", "name"),
    ("owner_app", "application"),
    ("algorithm", "algorithm"),
    ("rate", "rate"),
    ("max_permits", "max permits"),
    ("window_ms", "window"),
    ("lease_ttl_ms", "lease time"),
    ("scope", "whose bucket"),
    ("allowed_apps", "allowed applications"),
    ("failure_mode", "failure mode"),
    ("mode", "mode"),
    ("enabled", "enabled"),
    ("description", "description"),
    ("overrides", "overrides"),
    ("descriptors", "descriptor patterns"),
];

/// The fields that differ between `before` and `after` (either may be absent: a creation
/// or a deletion lists every field on one side).
pub fn changes(before: Option<&Value>, after: Option<&Value>) -> Vec<Change> {
    let empty = Map::new();
    let b = before.and_then(Value::as_object).unwrap_or(&empty);
    let a = after.and_then(Value::as_object).unwrap_or(&empty);
    let mut keys: Vec<&str> = LABELS
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| b.contains_key(*k) || a.contains_key(*k))
        .collect();
    let mut others: Vec<&str> = b
        .keys()
        .chain(a.keys())
        .map(String::as_str)
        .filter(|k| !IGNORED.contains(k) && !LABELS.iter().any(|(l, _)| l == k))
        .collect();
    others.sort_unstable();
    others.dedup();
    keys.extend(others);
    let mut out = Vec::new();
    for key in keys {
        let (old, new) = (present(b.get(key)), present(a.get(key)));
        if old == new || (key == "allowed_apps" && same_members(old, new)) {
            continue;
        }
        if key == "overrides" {
            out.extend(override_changes(old, new));
            continue;
        }
        if let (Some(b), Some(a)) = (
            old.and_then(Value::as_f64).filter(|_| key == "rate"),
            new.and_then(Value::as_f64),
        ) {
            let [b, a]: [String; 2] = rates_in_one_unit(&[b, a]).try_into().expect("two rates");
            out.push(Change {
                field: label(key),
                before: Some(b),
                after: Some(a),
            });
            continue;
        }
        out.push(Change {
            field: label(key),
            before: old.map(|v| words(key, v)),
            after: new.map(|v| words(key, v)),
        });
    }
    out
}

/// Whether two lists hold the same items in any order: the allowed applications are a
/// set, and versions saved before the order was kept differ in order alone.
fn same_members(a: Option<&Value>, b: Option<&Value>) -> bool {
    let sorted = |v: Option<&Value>| {
        let mut items: Vec<String> = v
            .and_then(Value::as_array)?
            .iter()
            .map(Value::to_string)
            .collect();
        items.sort_unstable();
        Some(items)
    };
    sorted(a).is_some_and(|a| Some(a) == sorted(b))
}

/// A value that is there: JSON null is no value.
fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn label(key: &str) -> String {
    LABELS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or_else(|| key.replace('_', " "), |(_, l)| (*l).to_owned())
}

/// A value as the form would show it.
fn words(key: &str, v: &Value) -> String {
    match (key, v) {
        ("rate", Value::Number(n)) => n
            .as_f64()
            .map_or_else(|| n.to_string(), |r| rates_in_one_unit(&[r]).concat()),
        ("window_ms" | "lease_ttl_ms", Value::Number(n)) => {
            n.as_i64().map_or_else(|| n.to_string(), duration)
        }
        ("algorithm" | "scope" | "action", Value::String(s)) => s.replace('_', " "),
        ("descriptors", Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(pattern_words)
            .collect::<Vec<_>>()
            .join("; "),
        (_, Value::Bool(b)) => if *b { "yes" } else { "no" }.to_owned(),
        (_, Value::String(s)) if s.is_empty() => "(empty)".to_owned(),
        (_, Value::String(s)) => s.clone(),
        (_, Value::Number(n)) => n.as_f64().map_or_else(|| n.to_string(), number),
        (_, Value::Array(items)) if items.is_empty() => "none".to_owned(),
        (_, Value::Array(items)) => items
            .iter()
            .map(|i| words(key, i))
            .collect::<Vec<_>>()
            .join(", "),
        (_, other) => other.to_string(),
    }
}

/// A descriptor pattern as the form writes it: `edge: database=users, user_id`.
fn pattern_words(p: &Value) -> String {
    let entries: Vec<&str> = p["entries"]
        .as_array()
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match p["domain"].as_str() {
        Some(domain) => format!("{domain}: {}", entries.join(", ")),
        None => entries.join(", "),
    }
}

/// Overrides compared by the caller they match: one change per caller added, removed or
/// given other limits.
fn override_changes(before: Option<&Value>, after: Option<&Value>) -> Vec<Change> {
    let list = |v: Option<&Value>| -> Vec<(String, String)> {
        v.and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|o| {
                        let matches = o["match"].as_str().unwrap_or_default().to_owned();
                        (matches, override_words(o))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (old, new) = (list(before), list(after));
    let find =
        |l: &[(String, String)], m: &str| l.iter().find(|(k, _)| k == m).map(|(_, w)| w.clone());
    let mut callers: Vec<&str> = old.iter().chain(&new).map(|(m, _)| m.as_str()).collect();
    callers.dedup();
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for m in callers {
        if seen.contains(&m) {
            continue;
        }
        seen.push(m);
        let (b, a) = (find(&old, m), find(&new, m));
        if b != a {
            out.push(Change {
                field: format!("override for {m}"),
                before: b,
                after: a,
            });
        }
    }
    out
}

/// One override's limits in words: "max 500 permits, 100 per second".
fn override_words(o: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(m) = o["max_permits"].as_i64() {
        parts.push(format!("max {m} permits"));
    }
    for key in ["rate", "window_ms", "lease_ttl_ms"] {
        if let Some(v) = present(o.get(key)) {
            let text = words(key, v);
            parts.push(match key {
                "rate" => text,
                "window_ms" => format!("window {text}"),
                _ => format!("leases up to {text}"),
            });
        }
    }
    if parts.is_empty() {
        "the policy's own limits".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(before: Value, after: Value) -> Vec<String> {
        changes(Some(&before), Some(&after))
            .iter()
            .map(Change::text)
            .collect()
    }

    #[test]
    fn a_policy_change_reads_in_the_form_units() {
        let before = json!({"name": "orders", "rate": 100.0 / 60.0, "max_permits": 10,
            "window_ms": null, "enabled": true, "version": 1, "updated_at": "x",
            "allowed_apps": ["shop"], "overrides": []});
        let after = json!({"name": "orders", "rate": 200.0 / 60.0, "max_permits": 10,
            "enabled": false, "version": 2, "updated_at": "y",
            "allowed_apps": ["shop", "blog"], "overrides": []});
        assert_eq!(
            texts(before, after),
            [
                "rate: 100 per minute → 200 per minute",
                "allowed applications: shop → shop, blog",
                "enabled: yes → no",
            ]
        );
    }

    #[test]
    fn allowed_applications_in_another_order_are_no_change() {
        let before = json!({"allowed_apps": ["shop", "billing"], "max_permits": 1});
        let after = json!({"allowed_apps": ["billing", "shop"], "max_permits": 2});
        assert_eq!(texts(before, after), ["max permits: 1 → 2"]);
    }

    #[test]
    fn windows_read_in_seconds_minutes_and_hours() {
        assert_eq!(
            texts(
                json!({"algorithm": "fixed_window", "window_ms": 60_000}),
                json!({"algorithm": "sliding_log", "window_ms": 3_600_000})
            ),
            [
                "algorithm: fixed window → sliding log",
                "window: 1 min → 1 h"
            ]
        );
    }

    #[test]
    fn descriptor_patterns_read_as_the_form_writes_them() {
        let before = json!({"descriptors": []});
        let after = json!({"descriptors": [{"domain": "edge", "entries": ["db=users", "user_id"]},
                                           {"entries": ["generic_key=x"]}]});
        assert_eq!(
            texts(before, after),
            ["descriptor patterns: none → edge: db=users, user_id; generic_key=x"]
        );
    }

    #[test]
    fn overrides_are_compared_by_caller() {
        let before = json!({"overrides": [{"match": "acme", "rate": 100, "max_permits": 500},
                                          {"match": "old", "max_permits": 1}]});
        let after = json!({"overrides": [{"match": "acme", "rate": 10, "max_permits": 500},
                                         {"match": "new", "window_ms": 30_000}]});
        assert_eq!(
            texts(before, after),
            [
                "override for acme: max 500 permits, 100 per second → max 500 permits, 10 per second",
                "override for old: max 1 permits (removed)",
                "override for new: window 30 s",
            ]
        );
    }

    #[test]
    fn a_creation_lists_every_field_and_other_entities_read_alike() {
        let created = changes(
            None,
            Some(&json!({"label": "ci", "id": "abc", "role": "owner"})),
        );
        assert_eq!(
            created.iter().map(Change::text).collect::<Vec<_>>(),
            ["label: ci", "role: owner"]
        );
        assert!(changes(Some(&json!({"a": 1})), Some(&json!({"a": 1}))).is_empty());
    }
}
