//! The scope of a policy and its overrides, parsed from a policy body: for a new policy,
//! or over the current one. Overrides belong to keyed scopes only, their `match` is an
//! app slug (`per_app`) or a key (`per_key`), and each sets only limits its algorithm
//! takes. Every invalid part is named (`overrides[3].rate`).

use crate::domain::{
    Algorithm, AppSlug, CallerKey, FieldErrors, MAX_OVERRIDES, MaxPermits, Millis, Override, Param,
    PolicySpec, Rate, Scope,
};

use super::inputs::{OverrideInput, PolicyInput};

/// The scope and overrides of the spec being built; `None` where a field had an error.
pub struct ScopeParts {
    pub scope: Option<Scope>,
    pub overrides: Option<Vec<Override>>,
}

/// `algorithm` is the spec's (already parsed, `None` if invalid); `current` the policy
/// being changed, if any.
pub fn scope_parts(
    errors: &mut FieldErrors,
    input: &PolicyInput,
    algorithm: Option<Algorithm>,
    current: Option<&PolicySpec>,
) -> ScopeParts {
    let scope = match &input.scope {
        Some(s) => errors.check(Scope::parse_field("scope", s)),
        None => Some(current.map_or(Scope::Global, |c| c.scope)),
    };
    let (Some(scope), Some(algorithm)) = (scope, algorithm) else {
        return ScopeParts {
            scope,
            overrides: None,
        };
    };
    let overrides = match (&input.overrides, current) {
        (Some(list), _) => parse_list(errors, scope, algorithm, list),
        (None, None) => Some(Vec::new()),
        (None, Some(c)) if c.overrides.is_empty() => Some(Vec::new()),
        (None, Some(c)) if c.scope != scope => {
            errors.push(
                "overrides",
                "must be given again (or []) with a change of scope: their match means another caller",
            );
            None
        }
        (None, Some(c)) => {
            // Kept, but they must still fit the algorithm, which may have changed.
            let again: Vec<OverrideInput> = c.overrides.iter().map(as_input).collect();
            parse_list(errors, scope, algorithm, &again)
        }
    };
    ScopeParts {
        scope: Some(scope),
        overrides,
    }
}

fn as_input(o: &Override) -> OverrideInput {
    OverrideInput {
        matches: Some(o.matches.clone()),
        max_permits: o.max_permits.map(MaxPermits::get),
        rate: o.rate.map(Rate::get),
        window_ms: o.window_ms.map(Millis::get),
        lease_ttl_ms: o.lease_ttl_ms.map(Millis::get),
    }
}

fn parse_list(
    errors: &mut FieldErrors,
    scope: Scope,
    algorithm: Algorithm,
    list: &[OverrideInput],
) -> Option<Vec<Override>> {
    if list.is_empty() {
        return Some(Vec::new());
    }
    if !scope.is_keyed() {
        errors.push(
            "overrides",
            "are only for a per_app or per_key policy: a global one has a single bucket",
        );
        return None;
    }
    if list.len() > MAX_OVERRIDES {
        errors.push(
            "overrides",
            format!("must be at most {MAX_OVERRIDES} (got {})", list.len()),
        );
        return None;
    }
    let before = errors.0.len();
    let mut parsed: Vec<Override> = Vec::with_capacity(list.len());
    for (i, input) in list.iter().enumerate() {
        if let Some(o) = parse_one(errors, scope, algorithm, i, input) {
            if let Some(j) = parsed.iter().position(|p| p.matches == o.matches) {
                errors.push(
                    format!("overrides[{i}].match"),
                    format!(
                        "{} has an earlier override in the list: one caller, one override",
                        parsed[j].matches
                    ),
                );
            }
            parsed.push(o);
        }
    }
    (errors.0.len() == before).then_some(parsed)
}

fn parse_one(
    errors: &mut FieldErrors,
    scope: Scope,
    algorithm: Algorithm,
    i: usize,
    input: &OverrideInput,
) -> Option<Override> {
    let field = |name: &str| format!("overrides[{i}].{name}");
    let matches = match &input.matches {
        None => {
            errors.push(field("match"), "is required");
            None
        }
        Some(m) if scope == Scope::PerApp => {
            errors.check(AppSlug::parse_field(&field("match"), m).map(|s| s.to_string()))
        }
        Some(m) => {
            errors.check(CallerKey::parse_field(&field("match"), m).map(|k| k.as_str().to_owned()))
        }
    };
    let max_permits = input
        .max_permits
        .and_then(|m| errors.check(MaxPermits::parse_field(&field("max_permits"), m)));
    let mut param = |p: Param, given: bool| -> bool {
        if given && !algorithm.uses(p) {
            errors.push(
                field(p.field()),
                format!("is not used by {}", algorithm.as_str()),
            );
            return false;
        }
        true
    };
    let rate_ok = param(Param::Rate, input.rate.is_some());
    let window_ok = param(Param::WindowMs, input.window_ms.is_some());
    let lease_ok = param(Param::LeaseTtlMs, input.lease_ttl_ms.is_some());
    let rate = input
        .rate
        .filter(|_| rate_ok)
        .and_then(|r| errors.check(Rate::parse_field(&field("rate"), r)));
    let window_ms = input
        .window_ms
        .filter(|_| window_ok)
        .and_then(|w| errors.check(Millis::parse_field(&field("window_ms"), w)));
    let lease_ttl_ms = input
        .lease_ttl_ms
        .filter(|_| lease_ok)
        .and_then(|l| errors.check(Millis::parse_field(&field("lease_ttl_ms"), l)));
    let sets_nothing = input.max_permits.is_none()
        && input.rate.is_none()
        && input.window_ms.is_none()
        && input.lease_ttl_ms.is_none();
    if sets_nothing {
        errors.push(
            format!("overrides[{i}]"),
            "sets no limit: give max_permits or a parameter of the algorithm",
        );
    }
    Some(Override {
        matches: matches?,
        max_permits,
        rate,
        window_ms,
        lease_ttl_ms,
    })
}
