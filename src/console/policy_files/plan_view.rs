//! A policy file's plan as people read it: per policy its action, with an update's field
//! changes in the file's own terms ("rate: 600/min → 120/min"), and the summary line the
//! CLI prints ("Plan: 1 to create, 1 to update, 1 to delete, 1 unchanged."). Fields are
//! shown as the plan names them, so a field the format gains shows up without a change
//! here. Also what was applied, as the one-time note the page shows after applying.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::console::diff::Change;
use crate::console::format::policy_href;
use crate::console::last_hour::LastHour;
use crate::control::FieldChange;
use crate::control::{Plan, PlanAction, PlannedPolicy};

/// One policy of the plan.
pub struct PlanRow {
    pub name: String,
    /// Its page; none for a policy the plan creates (it has no page yet).
    pub href: Option<String>,
    pub app: String,
    /// `create`, `update`, `delete` or `unchanged` (also its CSS class).
    pub action: &'static str,
    /// The stored version the plan was made against.
    pub version: Option<i64>,
    pub changes: Vec<Change>,
    /// For a delete: what it decided over the last hour (`None` until read, or when Redis
    /// cannot be reached).
    pub last_hour: Option<LastHour>,
}

/// The plan on the page, with what the apply form sends back.
pub struct PlanView {
    /// What the plan changes: creates, then updates, then deletes.
    pub rows: Vec<PlanRow>,
    /// The policies it leaves as they are, listed apart.
    pub unchanged: Vec<PlanRow>,
    pub summary: String,
    pub plan_id: String,
    /// Whether applying would change anything.
    pub changes_anything: bool,
}

impl PlanView {
    pub fn of(plan: &Plan) -> Self {
        let counts = Counts::of(&plan.policies);
        let (mut rows, unchanged): (Vec<PlanRow>, Vec<PlanRow>) = plan
            .policies
            .iter()
            .map(row)
            .partition(|r| r.action != "unchanged");
        rows.sort_by_key(|r| {
            ["create", "update", "delete"]
                .iter()
                .position(|a| *a == r.action)
        });
        Self {
            rows,
            unchanged,
            summary: format!(
                "Plan: {} to create, {} to update, {} to delete, {} unchanged.",
                counts.create, counts.update, counts.delete, counts.unchanged
            ),
            plan_id: plan.plan_id.clone(),
            changes_anything: counts.create + counts.update + counts.delete > 0,
        }
    }

    /// The names of the policies the plan deletes, for their last hour's counts.
    pub fn deleted_names(&self) -> Vec<&str> {
        self.rows
            .iter()
            .filter(|r| r.action == "delete")
            .map(|r| r.name.as_str())
            .collect()
    }

    /// Each deleted policy's last hour, given in the order of [`Self::deleted_names`].
    pub fn with_last_hours(mut self, hours: Vec<LastHour>) -> Self {
        let deletes = self.rows.iter_mut().filter(|r| r.action == "delete");
        for (row, hour) in deletes.zip(hours) {
            row.last_hour = Some(hour);
        }
        self
    }
}

#[derive(Default)]
struct Counts {
    create: usize,
    update: usize,
    delete: usize,
    unchanged: usize,
}

impl Counts {
    fn of(policies: &[PlannedPolicy]) -> Self {
        let mut counts = Self::default();
        for p in policies {
            *match p.action {
                PlanAction::Create => &mut counts.create,
                PlanAction::Update => &mut counts.update,
                PlanAction::Delete => &mut counts.delete,
                PlanAction::Unchanged => &mut counts.unchanged,
            } += 1;
        }
        counts
    }
}

fn row(p: &PlannedPolicy) -> PlanRow {
    PlanRow {
        href: (p.action != PlanAction::Create).then(|| policy_href(&p.name)),
        name: p.name.clone(),
        app: p.app.clone(),
        action: action_word(p.action),
        version: p.version,
        changes: p.changes.iter().map(change).collect(),
        last_hour: None,
    }
}

fn action_word(action: PlanAction) -> &'static str {
    match action {
        PlanAction::Create => "create",
        PlanAction::Update => "update",
        PlanAction::Delete => "delete",
        PlanAction::Unchanged => "unchanged",
    }
}

fn change(c: &FieldChange) -> Change {
    Change {
        field: c.field.clone(),
        before: c.before.as_ref().map(value_text),
        after: c.after.as_ref().map(value_text),
    }
}

/// A field's value as the file writes it: text as it is, anything else as JSON
/// (`[shop, billing]` reads `["shop","billing"]`, overrides as their objects).
fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What an applied plan did, by policy name: the one-time note of the page the apply
/// redirects to (kept as JSON in the session's flashes).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Applied {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub deleted: Vec<String>,
    pub unchanged: usize,
}

impl Applied {
    pub fn of(plan: &Plan) -> Self {
        let mut applied = Self::default();
        for p in &plan.policies {
            match p.action {
                PlanAction::Create => applied.created.push(p.name.clone()),
                PlanAction::Update => applied.updated.push(p.name.clone()),
                PlanAction::Delete => applied.deleted.push(p.name.clone()),
                PlanAction::Unchanged => applied.unchanged += 1,
            }
        }
        applied
    }

    /// "Applied: 1 created, 1 updated, 0 deleted, 3 unchanged."
    pub fn summary(&self) -> String {
        format!(
            "Applied: {} created, {} updated, {} deleted, {} unchanged.",
            self.created.len(),
            self.updated.len(),
            self.deleted.len(),
            self.unchanged
        )
    }

    /// Each changed policy with what was done to it and, unless deleted, its page.
    pub fn lines(&self) -> Vec<(&'static str, &str, Option<String>)> {
        self.created
            .iter()
            .map(|n| ("created", n.as_str(), Some(policy_href(n))))
            .chain(
                self.updated
                    .iter()
                    .map(|n| ("updated", n.as_str(), Some(policy_href(n)))),
            )
            .chain(self.deleted.iter().map(|n| ("deleted", n.as_str(), None)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(name: &str, action: PlanAction, changes: Vec<FieldChange>) -> PlannedPolicy {
        PlannedPolicy {
            name: name.into(),
            app: "shop".into(),
            action,
            version: (action != PlanAction::Create).then_some(3),
            changes,
            settings: String::new(),
        }
    }

    #[test]
    fn a_plan_reads_as_the_cli_prints_it() {
        let plan = Plan {
            plan_id: "abc".into(),
            applied: false,
            policies: vec![
                planned("kept", PlanAction::Unchanged, vec![]),
                planned(
                    "search",
                    PlanAction::Update,
                    vec![
                        FieldChange {
                            field: "rate".into(),
                            before: Some(Value::from("600/min")),
                            after: Some(Value::from("120/min")),
                        },
                        FieldChange {
                            field: "allowed_apps".into(),
                            before: Some(serde_json::json!(["shop"])),
                            after: Some(serde_json::json!(["shop", "billing"])),
                        },
                    ],
                ),
                planned("pings", PlanAction::Create, vec![]),
                planned("old", PlanAction::Delete, vec![]),
            ],
        };
        let view = PlanView::of(&plan);
        assert_eq!(
            view.summary,
            "Plan: 1 to create, 1 to update, 1 to delete, 1 unchanged."
        );
        assert!(view.changes_anything);
        // What changes comes first, in that order; what stays is apart.
        let order: Vec<&str> = view.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(order, ["pings", "search", "old"]);
        assert_eq!(view.unchanged.len(), 1);
        assert_eq!(view.deleted_names(), ["old"]);
        let search = &view.rows[1];
        assert_eq!(search.action, "update");
        assert_eq!(
            search.changes[0].text(),
            "rate: 600/min → 120/min",
            "a text value as the file writes it"
        );
        assert_eq!(
            search.changes[1].text(),
            r#"allowed_apps: ["shop"] → ["shop","billing"]"#
        );
        assert_eq!(
            view.rows[0].href, None,
            "a policy to create has no page yet"
        );
        assert_eq!(view.rows[2].href.as_deref(), Some("/policies/old"));

        let applied = Applied::of(&plan);
        assert_eq!(
            applied.summary(),
            "Applied: 1 created, 1 updated, 1 deleted, 1 unchanged."
        );
        let nothing = PlanView::of(&Plan {
            policies: vec![planned("kept", PlanAction::Unchanged, vec![])],
            ..plan
        });
        assert!(!nothing.changes_anything);
    }
}
