//! A policy's descriptor patterns parsed from a policy body (for a new policy, or over the
//! current one), with the rules that tie them to the scope: a bare entry makes one bucket
//! per value, so it needs `per_key`, and a `per_key` pattern needs a bare entry for its key.
//! No pattern twice in one policy, nor in two policies (`conflicts`): a gateway's descriptor
//! must find one policy.

use crate::domain::{
    DescriptorPattern, FieldErrors, MAX_DESCRIPTORS, PolicyName, PolicySpec, Scope,
};

use std::collections::HashSet;

use crate::store::PolicyRecord;

use super::inputs::{DescriptorInput, PolicyInput};

/// The patterns of the spec being built; `None` when any had an error. `scope` is the
/// spec's (already parsed, `None` if invalid).
pub fn descriptor_parts(
    errors: &mut FieldErrors,
    input: &PolicyInput,
    scope: Option<Scope>,
    current: Option<&PolicySpec>,
) -> Option<Vec<DescriptorPattern>> {
    let kept: Vec<DescriptorInput>;
    let list = match (&input.descriptors, current) {
        (Some(list), _) => list,
        (None, None) => return Some(Vec::new()),
        (None, Some(c)) => {
            // Kept, but they must still fit the scope, which may have changed.
            kept = c.descriptors.iter().map(as_input).collect();
            &kept
        }
    };
    if list.len() > MAX_DESCRIPTORS {
        errors.push(
            "descriptors",
            format!("must be at most {MAX_DESCRIPTORS} (got {})", list.len()),
        );
        return None;
    }
    let before = errors.0.len();
    let mut parsed: Vec<DescriptorPattern> = Vec::with_capacity(list.len());
    for (i, d) in list.iter().enumerate() {
        let field = format!("descriptors[{i}]");
        let Some(entries) = &d.entries else {
            errors.push(format!("{field}.entries"), "is required");
            continue;
        };
        let replaces = d.replaces.as_deref().unwrap_or_default();
        let pattern =
            match DescriptorPattern::parse_field(&field, d.domain.as_deref(), entries, replaces) {
                Ok(p) => p,
                Err(found) => {
                    errors.0.extend(found.0);
                    continue;
                }
            };
        check_scope(errors, &field, &pattern, scope);
        if let Some(j) = parsed.iter().position(|p| *p == pattern) {
            errors.push(field, format!("repeats descriptors[{j}]"));
        }
        parsed.push(pattern);
    }
    (errors.0.len() == before).then_some(parsed)
}

fn check_scope(
    errors: &mut FieldErrors,
    field: &str,
    pattern: &DescriptorPattern,
    scope: Option<Scope>,
) {
    match scope {
        Some(Scope::PerKey) if !pattern.has_bare() => errors.push(
            format!("{field}.entries"),
            "needs a bare entry (`user_id`, without `=value`) or a per-value wildcard (`path=/api/*`) on a per_key policy: its values are the key",
        ),
        Some(Scope::Global | Scope::PerApp) => {
            if let Some(j) = pattern.entries.iter().position(|e| e.keys_bucket()) {
                errors.push(
                    format!("{field}.entries[{j}]"),
                    "a bare or per-value wildcard entry makes one bucket per value: it needs the per_key scope (or write `key=value`, or `shared key=val*`)",
                );
            }
        }
        _ => {}
    }
}

/// The names a pattern replaces, as the JSON API lists them.
pub fn replace_texts(p: &DescriptorPattern) -> Vec<String> {
    p.replaces.iter().map(|n| n.as_str().to_owned()).collect()
}

fn as_input(p: &DescriptorPattern) -> DescriptorInput {
    DescriptorInput {
        domain: p.domain.clone(),
        entries: Some(p.entry_texts()),
        replaces: (!p.replaces.is_empty()).then(|| replace_texts(p)),
    }
}

/// Errors naming each pattern of `spec` that another policy of `others` already declares
/// (`others` may include `spec`'s own stored version, which is skipped by name).
pub fn conflicts<'a>(
    spec: &PolicySpec,
    others: impl IntoIterator<Item = (&'a PolicyName, &'a [DescriptorPattern])>,
) -> FieldErrors {
    let mut errors = FieldErrors::default();
    let others: Vec<(&PolicyName, &[DescriptorPattern])> = others
        .into_iter()
        .filter(|(name, _)| **name != spec.name)
        .collect();
    for (i, pattern) in spec.descriptors.iter().enumerate() {
        if let Some((name, _)) = others.iter().find(|(_, list)| list.contains(pattern)) {
            errors.push(
                format!("descriptors[{i}]"),
                format!("is already declared by the policy {name}"),
            );
        }
    }
    errors
}

/// The conflicts of a desired list (a policy file's): each spec against the others and
/// against the stored policies it does not list (those it lists it replaces), named
/// `<policy>.descriptors[i]`.
pub fn conflicts_in_list(specs: &[PolicySpec], stored: &[PolicyRecord]) -> FieldErrors {
    let listed: HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let owners: Vec<(&PolicyName, &[DescriptorPattern])> = stored
        .iter()
        .map(|r| &r.spec)
        .filter(|s| !listed.contains(s.name.as_str()))
        .chain(specs)
        .map(|s| (&s.name, s.descriptors.as_slice()))
        .collect();
    let mut errors = FieldErrors::default();
    for spec in specs.iter().filter(|s| !s.descriptors.is_empty()) {
        for e in conflicts(spec, owners.iter().copied()).0 {
            errors.push(format!("{}.{}", spec.name, e.field), e.message);
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::new_policy;

    fn input(scope: &str, patterns: &[(Option<&str>, &[&str])]) -> PolicyInput {
        PolicyInput {
            name: Some("users".into()),
            owner_app: Some("shop".into()),
            rate: Some(2.0),
            max_permits: Some(10),
            scope: Some(scope.into()),
            descriptors: Some(
                patterns
                    .iter()
                    .map(|(domain, entries)| DescriptorInput {
                        domain: domain.map(str::to_owned),
                        entries: Some(entries.iter().map(|e| (*e).to_owned()).collect()),
                        replaces: None,
                    })
                    .collect(),
            ),
            ..PolicyInput::default()
        }
    }

    fn fields(input: &PolicyInput) -> Vec<String> {
        new_policy(input)
            .unwrap_err()
            .0
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn bare_entries_and_the_scope_go_together() {
        let ok = new_policy(&input(
            "per_key",
            &[(Some("edge"), &["db=users", "user_id"])],
        ));
        assert_eq!(
            ok.unwrap().descriptors[0].to_string(),
            "edge: db=users, user_id"
        );
        assert!(new_policy(&input("global", &[(None, &["db=users"])])).is_ok());
        assert_eq!(
            fields(&input(
                "global",
                &[(None, &["db=users"]), (None, &["a=b", "user_id"])]
            )),
            ["descriptors[1].entries[1]"]
        );
        assert_eq!(
            fields(&input("per_key", &[(None, &["db=users"])])),
            ["descriptors[0].entries"]
        );
    }

    #[test]
    fn a_pattern_twice_is_named() {
        let twice = input(
            "global",
            &[(None, &["a=b"]), (Some("e"), &["a=b"]), (None, &["a=b"])],
        );
        assert_eq!(fields(&twice), ["descriptors[2]"]);
    }

    #[test]
    fn another_policys_pattern_is_a_conflict() {
        let spec =
            new_policy(&input("global", &[(None, &["a=b"]), (Some("e"), &["a=b"])])).unwrap();
        let other = PolicyName::parse("other").unwrap();
        let theirs = [DescriptorPattern::parse_line("d", "e: a=b").unwrap()];
        let found = conflicts(&spec, [(&other, &theirs[..])]);
        assert_eq!(found.0.len(), 1);
        assert_eq!(found.0[0].field, "descriptors[1]");
        assert!(found.0[0].message.contains("other"));
        let own = spec.name.clone();
        assert!(conflicts(&spec, [(&own, &spec.descriptors[..])]).is_empty());
    }
}
