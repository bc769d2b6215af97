//! A plan's id: one digest of every planned policy (its name, application, action, the
//! stored version it was planned against, its field changes and every setting it would
//! have), and the time of the newest change among the stored policies it saw. Fixed in
//! size, whatever the number of policies, so that it fits a query string; the same plan
//! made twice has the same id; the time lets a stale plan name the policies changed since
//! it was made, and tell that apart from a plan made for another file.

use sha2::{Digest, Sha256};

use super::plan::PlannedPolicy;

/// Hex digits of the digest.
const DIGEST_DIGITS: usize = 32;

/// The id of a plan of `entries`, whose stored policies last changed at `newest_ms`.
pub(super) fn plan_id(entries: &[PlannedPolicy], newest_ms: i64) -> String {
    format!("{}-{newest_ms}", digest(entries))
}

/// Whether `seen` is the id of a plan of `entries`.
pub(super) fn same_plan(seen: &str, entries: &[PlannedPolicy]) -> bool {
    seen.split_once('-')
        .is_some_and(|(digest_seen, _)| digest_seen == digest(entries))
}

/// The newest change the plan `seen` saw, if it is a plan id at all.
pub(super) fn newest_seen(seen: &str) -> Option<i64> {
    let (digest_seen, made) = seen.split_once('-')?;
    (digest_seen.len() == DIGEST_DIGITS).then_some(())?;
    made.parse().ok()
}

fn digest(entries: &[PlannedPolicy]) -> String {
    let mut hasher = Sha256::new();
    for entry in entries {
        // Serialising these types cannot fail; the settings are the target spec's text.
        hasher.update(serde_json::to_vec(entry).unwrap_or_default());
        hasher.update(entry.settings.as_bytes());
        hasher.update([0]);
    }
    let mut digest = hex::encode(hasher.finalize());
    digest.truncate(DIGEST_DIGITS);
    digest
}

/// Why a plan is stale: the policies changed since it was made (`changed`), or, if none
/// did, that the id is of another file's plan.
pub(super) fn stale(seen: &str, changed: &[String]) -> String {
    match (newest_seen(seen), changed) {
        (None, _) => "the plan_id is not one this server made; plan again".into(),
        (Some(_), []) => "the plan_id is the plan of another file (or of the other prune \
                          setting), or a policy it planned was deleted since: plan again"
            .into(),
        (Some(_), changed) => {
            let shown: Vec<&str> = changed.iter().take(20).map(String::as_str).collect();
            let more = changed.len() - shown.len();
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!(
                "the plan is stale: changed since it was made: {}{more}; plan again",
                shown.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::PlanAction;

    fn policy(name: &str, version: Option<i64>, settings: &str) -> PlannedPolicy {
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
            settings: settings.into(),
        }
    }

    #[test]
    fn an_id_binds_versions_and_settings() {
        let before = vec![policy("a", Some(1), "x"), policy("b", None, "rate 1")];
        let id = plan_id(&before, 1_000);
        assert_eq!(newest_seen(&id), Some(1_000));
        assert!(same_plan(&id, &before));
        let edited = vec![policy("a", Some(2), "x"), policy("b", None, "rate 1")];
        assert!(!same_plan(&id, &edited));
        let other_create = vec![policy("a", Some(1), "x"), policy("b", None, "rate 1000")];
        assert!(!same_plan(&id, &other_create));
    }

    #[test]
    fn a_stale_plan_says_why() {
        assert_eq!(
            stale("0123-abc", &[]),
            "the plan_id is not one this server made; plan again"
        );
        let id = plan_id(&[], 5);
        assert!(stale(&id, &[]).contains("the plan of another file"));
        assert_eq!(
            stale(&id, &["a".into()]),
            "the plan is stale: changed since it was made: a; plan again"
        );
        let many: Vec<String> = (0..25).map(|i| format!("p{i}")).collect();
        assert!(stale(&id, &many).ends_with("p19 and 5 more; plan again"));
        // Garbage never panics.
        assert!(!same_plan("ü-", &[]) && newest_seen("ü-").is_none());
    }
}
