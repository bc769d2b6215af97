//! The policies' descriptor patterns as a tree per Envoy domain (and one for patterns of
//! any domain), built once per reload, so that a gateway's descriptor finds its policy in
//! a walk as long as the descriptor, whatever the number of policies: envoyproxy/ratelimit's
//! tree walk. At each entry an exact `key=value` child is tried first, then the first
//! wildcard `key=val*ue` child matching (see `descriptor_wildcard`), then the bare `key`
//! one, so among several matching patterns the most precise where they first differ wins;
//! at the end a pattern of the request's domain wins over one of any domain.

use std::collections::HashMap;
use std::sync::Arc;

use crate::domain::{MAX_DESCRIPTOR_ENTRIES, PolicyName};

use super::PolicyEntry;
use super::descriptor_wildcard::Wildcards;

/// The policy a descriptor names, and its bucket key: the values at the pattern's bare and
/// per-value wildcard entries joined with `|` (`None` when the pattern has none).
#[derive(Debug, Clone)]
pub struct DescriptorMatch {
    pub policy: Arc<PolicyEntry>,
    pub key: Option<String>,
    /// Which of the policy's patterns matched.
    pub pattern: usize,
}

impl DescriptorMatch {
    /// The policies the matched pattern replaces in the request.
    pub fn replaces(&self) -> &[PolicyName] {
        &self.policy.descriptors[self.pattern].replaces
    }
}

#[derive(Debug, Default, Clone)]
pub(super) struct DescriptorIndex {
    by_domain: HashMap<String, Node>,
    any_domain: Node,
}

/// One entry's position in a tree: the children by exact `key` then `value`, the wildcard
/// and bare children by `key`, and the policy whose pattern ends here.
#[derive(Debug, Default, Clone)]
struct Node {
    exact: HashMap<String, HashMap<String, Node>>,
    wildcard: HashMap<String, Wildcards<Node>>,
    bare: HashMap<String, Node>,
    /// The policy whose pattern ends here, and that pattern's place among its patterns.
    policy: Option<(Arc<PolicyEntry>, usize)>,
}

/// Bit `i` set: the value at entry `i` is part of the bucket key (the matched pattern's
/// entry `i` is bare or a per-value wildcard).
type BareMask = u16;

impl DescriptorIndex {
    /// The index of `policies`' patterns. Two policies never declare the same pattern (the
    /// control layer refuses it); should the store hold such a pair anyway, the policy of
    /// the smaller name keeps it, whatever order the set is read in.
    pub(super) fn build<'a>(policies: impl Iterator<Item = &'a Arc<PolicyEntry>>) -> Self {
        let mut with_patterns: Vec<&Arc<PolicyEntry>> =
            policies.filter(|p| !p.descriptors.is_empty()).collect();
        with_patterns.sort_by(|a, b| a.config.name.cmp(&b.config.name));
        let mut index = Self::default();
        for policy in with_patterns {
            for (at, pattern) in policy.descriptors.iter().enumerate() {
                let root = match &pattern.domain {
                    Some(domain) => index.by_domain.entry(domain.clone()).or_default(),
                    None => &mut index.any_domain,
                };
                let mut node = root;
                for entry in &pattern.entries {
                    node = match &entry.value {
                        Some(value) if entry.is_wildcard() => node
                            .wildcard
                            .entry(entry.key.clone())
                            .or_default()
                            .child(value, entry.shared),
                        Some(value) => node
                            .exact
                            .entry(entry.key.clone())
                            .or_default()
                            .entry(value.clone())
                            .or_default(),
                        None => node.bare.entry(entry.key.clone()).or_default(),
                    };
                }
                match &node.policy {
                    Some((kept, _)) => tracing::error!(
                        pattern = %pattern,
                        kept = %kept.config.name,
                        ignored = %policy.config.name,
                        "two policies declare one descriptor pattern"
                    ),
                    None => node.policy = Some((policy.clone(), at)),
                }
            }
        }
        index
    }

    /// The policy whose pattern matches the descriptor `entries` (key, value) in `domain`.
    pub(super) fn find(&self, domain: &str, entries: &[(&str, &str)]) -> Option<DescriptorMatch> {
        if entries.is_empty() || entries.len() > MAX_DESCRIPTOR_ENTRIES {
            return None;
        }
        let ((policy, pattern), bare) = walk(
            self.by_domain.get(domain),
            Some(&self.any_domain),
            entries,
            0,
            (0, 0),
        )?;
        Some(DescriptorMatch {
            policy: policy.clone(),
            key: (bare != 0).then(|| key_of(entries, bare)),
            pattern: *pattern,
        })
    }
}

/// Walks the domain's tree and the any-domain tree side by side from `depth`: exact
/// children first, then the first matching wildcard ones, then bare ones, backing up when
/// a branch ends without a policy. Each tree keeps its own mask, since the wildcards each
/// tree matches may differ in sharing. At most three branches per entry, whatever the
/// number of policies.
fn walk<'a>(
    domain: Option<&'a Node>,
    any: Option<&'a Node>,
    entries: &[(&str, &str)],
    depth: usize,
    masks: (BareMask, BareMask),
) -> Option<(&'a (Arc<PolicyEntry>, usize), BareMask)> {
    let Some(&(key, value)) = entries.get(depth) else {
        let here = |n: Option<&'a Node>| n.and_then(|n| n.policy.as_ref());
        return (here(domain).map(|p| (p, masks.0))).or_else(|| here(any).map(|p| (p, masks.1)));
    };
    let exact = |n: Option<&'a Node>| n.and_then(|n| n.exact.get(key)?.get(value));
    let (domain_exact, any_exact) = (exact(domain), exact(any));
    if (domain_exact.is_some() || any_exact.is_some())
        && let Some(found) = walk(domain_exact, any_exact, entries, depth + 1, masks)
    {
        return Some(found);
    }
    let bit = 1 << depth;
    let wildcard = |n: Option<&'a Node>, mask: BareMask| {
        n.and_then(|n| n.wildcard.get(key)?.find(value))
            .map(|w| (&w.node, if w.shared { mask } else { mask | bit }))
    };
    let (domain_wild, any_wild) = (wildcard(domain, masks.0), wildcard(any, masks.1));
    if (domain_wild.is_some() || any_wild.is_some())
        && let Some(found) = walk(
            domain_wild.map(|(n, _)| n),
            any_wild.map(|(n, _)| n),
            entries,
            depth + 1,
            (
                domain_wild.map_or(masks.0, |(_, m)| m),
                any_wild.map_or(masks.1, |(_, m)| m),
            ),
        )
    {
        return Some(found);
    }
    let by_key = |n: Option<&'a Node>| n.and_then(|n| n.bare.get(key));
    let (domain_bare, any_bare) = (by_key(domain), by_key(any));
    if domain_bare.is_none() && any_bare.is_none() {
        return None;
    }
    walk(
        domain_bare,
        any_bare,
        entries,
        depth + 1,
        (masks.0 | bit, masks.1 | bit),
    )
}

/// The values of the keyed positions, joined with `|`, in one allocation.
fn key_of(entries: &[(&str, &str)], bare: BareMask) -> String {
    let values = || {
        entries
            .iter()
            .enumerate()
            .filter(move |(i, _)| bare & (1 << i) != 0)
            .map(|(_, (_, value))| *value)
    };
    let len = values().map(str::len).sum::<usize>() + values().count() - 1;
    let mut key = String::with_capacity(len);
    for (i, value) in values().enumerate() {
        if i > 0 {
            key.push('|');
        }
        key.push_str(value);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{DescriptorInput, PolicyInput, new_policy};
    use crate::store::PolicyRecord;

    /// A policy named `name` declaring `patterns`, each a line as the console writes it.
    fn record(name: &str, patterns: &[&str]) -> PolicyRecord {
        let parsed: Vec<crate::domain::DescriptorPattern> = patterns
            .iter()
            .map(|line| crate::domain::DescriptorPattern::parse_line("d", line).unwrap())
            .collect();
        let keyed = parsed.iter().any(|p| p.has_bare());
        let spec = new_policy(&PolicyInput {
            name: Some(name.into()),
            owner_app: Some("shop".into()),
            rate: Some(1.0),
            max_permits: Some(1),
            scope: Some(if keyed { "per_key" } else { "global" }.into()),
            descriptors: Some(
                parsed
                    .iter()
                    .map(|p| DescriptorInput {
                        domain: p.domain.clone(),
                        entries: Some(p.entry_texts()),
                        replaces: Some(crate::control::replace_texts(p)),
                    })
                    .collect(),
            ),
            ..PolicyInput::default()
        })
        .unwrap();
        PolicyRecord {
            id: name.into(),
            spec,
            version: 1,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    fn policy(name: &str, patterns: &[&str]) -> Arc<PolicyEntry> {
        Arc::new(PolicyEntry::of(&record(name, patterns)))
    }

    fn index(policies: &[Arc<PolicyEntry>]) -> DescriptorIndex {
        DescriptorIndex::build(policies.iter())
    }

    /// The name of the policy found and its key.
    fn found(
        index: &DescriptorIndex,
        domain: &str,
        entries: &[(&str, &str)],
    ) -> Option<(String, Option<String>)> {
        index
            .find(domain, entries)
            .map(|m| (m.policy.config.name.to_string(), m.key))
    }

    fn named(name: &str, key: Option<&str>) -> Option<(String, Option<String>)> {
        Some((name.to_owned(), key.map(str::to_owned)))
    }

    #[test]
    fn same_length_same_keys_in_order_and_the_exact_values() {
        let index = index(&[policy("users", &["edge: database=users, user_id"])]);
        let d = [("database", "users"), ("user_id", "42")];
        assert_eq!(found(&index, "edge", &d), named("users", Some("42")));
        assert_eq!(found(&index, "other", &d), None, "another domain");
        assert_eq!(found(&index, "edge", &d[..1]), None, "shorter");
        let longer = [("database", "users"), ("user_id", "42"), ("x", "y")];
        assert_eq!(found(&index, "edge", &longer), None, "longer");
        let swapped = [("user_id", "42"), ("database", "users")];
        assert_eq!(
            found(&index, "edge", &swapped),
            None,
            "keys in another order"
        );
        let other_value = [("database", "orders"), ("user_id", "42")];
        assert_eq!(found(&index, "edge", &other_value), None);
        assert_eq!(found(&index, "edge", &[]), None);
    }

    #[test]
    fn the_key_joins_the_bare_values_in_order() {
        let index = index(&[
            policy("pair", &["a, k=v, b"]),
            policy("global", &["generic_key=login"]),
        ]);
        assert_eq!(
            found(&index, "any", &[("a", "1"), ("k", "v"), ("b", "2")]),
            named("pair", Some("1|2"))
        );
        assert_eq!(
            found(&index, "any", &[("generic_key", "login")]),
            named("global", None)
        );
    }

    #[test]
    fn an_exact_entry_beats_a_bare_one_where_they_first_differ() {
        let index = index(&[
            policy("per-user", &["database=users, user_id"]),
            policy("vip", &["database=users, user_id=vip"]),
            policy("any-db", &["database, user_id=vip"]),
        ]);
        let vip = [("database", "users"), ("user_id", "vip")];
        assert_eq!(found(&index, "e", &vip), named("vip", None));
        let other = [("database", "users"), ("user_id", "7")];
        assert_eq!(found(&index, "e", &other), named("per-user", Some("7")));
        // database=users is exact in per-user: it beats any-db, exact later on.
        let orders_vip = [("database", "orders"), ("user_id", "vip")];
        assert_eq!(
            found(&index, "e", &orders_vip),
            named("any-db", Some("orders"))
        );
    }

    #[test]
    fn an_exact_branch_that_ends_without_a_policy_backs_up_to_the_bare_one() {
        let index = index(&[
            policy("deep", &["a=1, b=2, c=3"]),
            policy("bare-a", &["a, b=2, c=4"]),
        ]);
        let d = [("a", "1"), ("b", "2"), ("c", "4")];
        assert_eq!(found(&index, "e", &d), named("bare-a", Some("1")));
    }

    #[test]
    fn a_pattern_of_the_domain_beats_one_of_any_domain() {
        let index = index(&[
            policy("anywhere", &["generic_key=login"]),
            policy("at-edge", &["edge: generic_key=login"]),
        ]);
        let d = [("generic_key", "login")];
        assert_eq!(found(&index, "edge", &d), named("at-edge", None));
        assert_eq!(found(&index, "internal", &d), named("anywhere", None));
        // Where the entries differ first decides before the domain does.
        let both = [
            policy("edge-bare", &["edge: k"]),
            policy("any-exact", &["k=v"]),
        ];
        let index2 = DescriptorIndex::build(both.iter());
        assert_eq!(
            found(&index2, "edge", &[("k", "v")]),
            named("any-exact", None)
        );
        assert_eq!(
            found(&index2, "edge", &[("k", "w")]),
            named("edge-bare", Some("w"))
        );
    }

    #[test]
    fn the_snapshot_keeps_its_index_with_its_policies() {
        let snapshot = crate::snapshot::Snapshot::default();
        let d = [("generic_key", "login")];
        let name = |s: &crate::snapshot::Snapshot| {
            s.descriptor_policy("edge", &d)
                .map(|m| m.policy.config.name.to_string())
        };
        snapshot.replace_policies(&[record("a", &["generic_key=login"]), record("b", &[])]);
        assert_eq!(name(&snapshot).as_deref(), Some("a"));
        snapshot.upsert_policy(&record("a", &["generic_key=logout"]));
        snapshot.upsert_policy(&record("b", &["edge: generic_key=login"]));
        assert_eq!(
            name(&snapshot).as_deref(),
            Some("b"),
            "a local write re-indexes"
        );
        snapshot.remove_policy("b");
        assert_eq!(name(&snapshot), None);
    }

    #[test]
    fn exact_beats_wildcard_beats_bare() {
        let index = index(&[
            policy("exact", &["path=/api/1/action"]),
            policy("per-value", &["path=/api/*/action"]),
            policy("shared", &["shared path=/api/*"]),
            policy("bare", &["path"]),
        ]);
        let f = |v: &str| found(&index, "e", &[("path", v)]);
        assert_eq!(f("/api/1/action"), named("exact", None));
        assert_eq!(
            f("/api/2/action"),
            named("per-value", Some("/api/2/action"))
        );
        assert_eq!(f("/api/2/other"), named("shared", None), "shared: no key");
        assert_eq!(f("/web"), named("bare", Some("/web")));
    }

    #[test]
    fn a_wildcard_branch_without_a_policy_backs_up_to_the_bare_one() {
        let index = index(&[
            policy("read", &["edge: user, action=read*, resource"]),
            policy("any-action", &["edge: user, action, resource=doc"]),
        ]);
        let read = [("user", "al"), ("action", "readfile"), ("resource", "x")];
        assert_eq!(
            found(&index, "edge", &read),
            named("read", Some("al|readfile|x"))
        );
        let doc = [("user", "al"), ("action", "write"), ("resource", "doc")];
        assert_eq!(
            found(&index, "edge", &doc),
            named("any-action", Some("al|write"))
        );
        let unmatched = [("user", "al"), ("action", "write"), ("resource", "x")];
        assert_eq!(found(&index, "edge", &unmatched), None);
    }

    #[test]
    fn each_tree_keys_by_its_own_wildcard() {
        let index = index(&[
            policy("domain-shared", &["edge: shared route=api/*, method"]),
            policy("any-per-value", &["route=api/v*, method"]),
        ]);
        let d = [("route", "api/v1"), ("method", "GET")];
        assert_eq!(
            found(&index, "edge", &d),
            named("domain-shared", Some("GET"))
        );
        assert_eq!(
            found(&index, "other", &d),
            named("any-per-value", Some("api/v1|GET"))
        );
    }

    #[test]
    fn a_pattern_declared_twice_is_kept_by_the_smaller_name() {
        let (a, b) = (policy("a", &["k=v"]), policy("b", &["k=v"]));
        for order in [[a.clone(), b.clone()], [b.clone(), a.clone()]] {
            assert_eq!(found(&index(&order), "e", &[("k", "v")]), named("a", None));
        }
    }
}
