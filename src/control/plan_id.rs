//! A plan's id: one short digest per planned policy (its name, stored version and
//! change), so that a plan made again after someone else's edit names the policies that
//! changed meanwhile, which one digest of the whole could not.

use sha2::{Digest, Sha256};

use super::apply::{Plan, PlannedPolicy};

/// Hex digits of each policy's digest in a plan id.
const ENTRY_DIGITS: usize = 12;

/// The digests of a plan's policies, in plan order.
pub(super) fn plan_id(entries: &[PlannedPolicy]) -> String {
    entries.iter().map(entry_digest).collect()
}

fn entry_digest(entry: &PlannedPolicy) -> String {
    let text = serde_json::to_string(entry).unwrap_or_default();
    let mut digest = hex::encode(Sha256::digest(text.as_bytes()));
    digest.truncate(ENTRY_DIGITS);
    digest
}

/// Why a plan is stale, naming the policies whose state or change is not the planned one.
pub(super) fn stale(seen: &str, plan: &Plan) -> String {
    let seen: Vec<&str> = (0..seen.len() / ENTRY_DIGITS)
        .filter_map(|i| seen.get(i * ENTRY_DIGITS..(i + 1) * ENTRY_DIGITS))
        .collect();
    let changed: Vec<&str> = plan
        .policies
        .iter()
        .filter(|p| !seen.contains(&entry_digest(p).as_str()))
        .map(|p| p.name.as_str())
        .collect();
    if changed.is_empty() {
        "the plan is stale: the policies changed since it was made; plan again".into()
    } else {
        format!(
            "the plan is stale: changed since it was made: {}; plan again",
            changed.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::PlanAction;

    fn policy(name: &str, version: Option<i64>) -> PlannedPolicy {
        PlannedPolicy {
            name: name.into(),
            app: "shop".into(),
            action: if version.is_some() {
                PlanAction::Unchanged
            } else {
                PlanAction::Create
            },
            version,
            changes: Vec::new(),
        }
    }

    fn plan(policies: Vec<PlannedPolicy>) -> Plan {
        Plan {
            plan_id: plan_id(&policies),
            applied: false,
            policies,
        }
    }

    #[test]
    fn a_stale_plan_names_what_changed() {
        let before = plan(vec![policy("a", Some(1)), policy("b", None)]);
        assert_eq!(before.plan_id.len(), 2 * ENTRY_DIGITS);
        let after = plan(vec![policy("a", Some(2)), policy("b", None)]);
        assert_ne!(before.plan_id, after.plan_id);
        assert_eq!(
            stale(&before.plan_id, &after),
            "the plan is stale: changed since it was made: a; plan again"
        );
        // Garbage names every policy, and never panics.
        assert!(stale("ü", &after).contains("a, b"));
    }
}
