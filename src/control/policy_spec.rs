//! A policy body (`PolicyInput`) made into a complete, valid `PolicySpec`: as a new
//! policy (required fields, defaults) or as a patch over the current one (any subset of
//! fields; name and owner fixed). Every invalid field is reported at once, in the order
//! of the form, so a client or the console can show them all.

use crate::domain::{
    Algorithm, AppSlug, DescriptorPattern, DisplayUnits, FailureMode, FieldError, FieldErrors,
    MaxPermits, Millis, Mode, Param, PolicyName, PolicySpec, Rate, check_description,
};

use super::descriptors::descriptor_parts;
use super::inputs::{PolicyInput, required};
use super::overrides::{ScopeParts, scope_parts};

/// A new policy: `name`, `owner_app` and `max_permits` (and the algorithm's own
/// parameters) are required; the rest default (token bucket, fail closed, enabled,
/// allowed to its owner only).
pub fn new_policy(input: &PolicyInput) -> Result<PolicySpec, FieldErrors> {
    let mut errors = FieldErrors::default();
    let name = required(&mut errors, "name", &input.name)
        .and_then(|n| errors.check(PolicyName::parse(&n)));
    let owner_app = required(&mut errors, "owner_app", &input.owner_app)
        .and_then(|o| errors.check(AppSlug::parse_field("owner_app", &o)));
    let algorithm = algorithm(&mut errors, input, Algorithm::TokenBucket);
    let max_permits = match input.max_permits {
        Some(m) => errors.check(MaxPermits::parse_field("max_permits", m)),
        None => {
            errors.push("max_permits", "is required");
            None
        }
    };
    let params = Params::of(&mut errors, algorithm, input, None);
    let common = Common::of(&mut errors, input, None);
    let allowed_apps =
        allowed_apps(&mut errors, input).or_else(|| owner_app.clone().map(|o| vec![o]));
    let scope = scope_parts(&mut errors, input, algorithm, None);
    let descriptors = descriptor_parts(&mut errors, input, scope.scope, None);
    if input.version.is_some() {
        errors.push("version", "is only accepted on a change");
    }
    errors.clone().into_result()?;
    assemble(Parts {
        name,
        owner_app,
        algorithm,
        max_permits,
        params,
        common,
        allowed_apps,
        scope,
        descriptors,
        units: input.units.unwrap_or_default(),
    })
}

/// The current policy with the fields the input sets changed; the name and the owner
/// cannot change.
pub fn patched_policy(
    input: &PolicyInput,
    current: &PolicySpec,
) -> Result<PolicySpec, FieldErrors> {
    let mut errors = FieldErrors::default();
    if input
        .name
        .as_ref()
        .is_some_and(|n| n != current.name.as_str())
    {
        errors.push("name", "cannot be changed; create a new policy instead");
    }
    if input
        .owner_app
        .as_ref()
        .is_some_and(|o| o != current.owner_app.as_str())
    {
        errors.push("owner_app", "cannot be changed");
    }
    let algorithm = algorithm(&mut errors, input, current.algorithm);
    let max_permits = match input.max_permits {
        Some(m) => errors.check(MaxPermits::parse_field("max_permits", m)),
        None => Some(current.max_permits),
    };
    let params = Params::of(&mut errors, algorithm, input, Some(current));
    let common = Common::of(&mut errors, input, Some(current));
    // The allowed applications are a set: the same ones in another order (a form lists
    // them by name) change nothing, and keep their stored order.
    let allowed_apps = match allowed_apps(&mut errors, input) {
        Some(listed) if !same_set(&listed, &current.allowed_apps) => Some(listed),
        _ => Some(current.allowed_apps.clone()),
    };
    let scope = scope_parts(&mut errors, input, algorithm, Some(current));
    let descriptors = descriptor_parts(&mut errors, input, scope.scope, Some(current));
    errors.clone().into_result()?;
    assemble(Parts {
        name: Some(current.name.clone()),
        owner_app: Some(current.owner_app.clone()),
        algorithm,
        max_permits,
        params,
        common,
        allowed_apps,
        scope,
        descriptors,
        units: input.units.unwrap_or(current.units),
    })
}

/// The parsed parts of a spec; each is `None` only when its field had an error.
struct Parts {
    name: Option<PolicyName>,
    owner_app: Option<AppSlug>,
    algorithm: Option<Algorithm>,
    max_permits: Option<MaxPermits>,
    params: Params,
    common: Common,
    allowed_apps: Option<Vec<AppSlug>>,
    scope: ScopeParts,
    descriptors: Option<Vec<DescriptorPattern>>,
    units: DisplayUnits,
}

/// The spec, once every field parsed (the callers return on any error first).
fn assemble(parts: Parts) -> Result<PolicySpec, FieldErrors> {
    let missing = |field: &str| FieldErrors::from(FieldError::new(field, "is invalid"));
    Ok(PolicySpec {
        name: parts.name.ok_or_else(|| missing("name"))?,
        owner_app: parts.owner_app.ok_or_else(|| missing("owner_app"))?,
        algorithm: parts.algorithm.ok_or_else(|| missing("algorithm"))?,
        rate: parts.params.rate,
        max_permits: parts.max_permits.ok_or_else(|| missing("max_permits"))?,
        window_ms: parts.params.window_ms,
        lease_ttl_ms: parts.params.lease_ttl_ms,
        allowed_apps: parts.allowed_apps.ok_or_else(|| missing("allowed_apps"))?,
        failure_mode: parts
            .common
            .failure_mode
            .ok_or_else(|| missing("failure_mode"))?,
        enabled: parts.common.enabled,
        mode: parts.common.mode.ok_or_else(|| missing("mode"))?,
        description: parts
            .common
            .description
            .ok_or_else(|| missing("description"))?,
        scope: parts.scope.scope.ok_or_else(|| missing("scope"))?,
        overrides: parts.scope.overrides.ok_or_else(|| missing("overrides"))?,
        descriptors: parts.descriptors.ok_or_else(|| missing("descriptors"))?,
        // A unit is kept only beside the field it reads: none for a field the algorithm
        // does not take.
        units: DisplayUnits {
            rate: parts.units.rate.filter(|_| parts.params.rate.is_some()),
            window: parts
                .units
                .window
                .filter(|_| parts.params.window_ms.is_some()),
            lease_ttl: parts
                .units
                .lease_ttl
                .filter(|_| parts.params.lease_ttl_ms.is_some()),
        },
    })
}

/// The algorithm the input names, or `otherwise`.
fn algorithm(
    errors: &mut FieldErrors,
    input: &PolicyInput,
    otherwise: Algorithm,
) -> Option<Algorithm> {
    match &input.algorithm {
        Some(a) => errors.check(Algorithm::parse_field("algorithm", a)),
        None => Some(otherwise),
    }
}

/// The fields every algorithm shares beyond its limits, given or kept.
struct Common {
    failure_mode: Option<FailureMode>,
    enabled: bool,
    mode: Option<Mode>,
    description: Option<String>,
}

impl Common {
    fn of(errors: &mut FieldErrors, input: &PolicyInput, current: Option<&PolicySpec>) -> Self {
        let failure_mode = match &input.failure_mode {
            Some(f) => errors.check(FailureMode::parse_field("failure_mode", f)),
            None => Some(current.map_or(FailureMode::Closed, |c| c.failure_mode)),
        };
        let mode = match &input.mode {
            Some(m) => errors.check(Mode::parse_field("mode", m)),
            None => Some(current.map_or(Mode::Enforce, |c| c.mode)),
        };
        let description = match &input.description {
            Some(d) => errors.check(check_description("description", d)),
            None => Some(current.map(|c| c.description.clone()).unwrap_or_default()),
        };
        Self {
            failure_mode,
            enabled: input.enabled.unwrap_or(current.is_none_or(|c| c.enabled)),
            mode,
            description,
        }
    }
}

/// The allowed apps the input lists, if it lists them; one listed twice is an error (a
/// list that says one thing twice was likely meant to say two).
fn allowed_apps(errors: &mut FieldErrors, input: &PolicyInput) -> Option<Vec<AppSlug>> {
    let list = input.allowed_apps.as_ref()?;
    let mut slugs = Vec::with_capacity(list.len());
    let mut seen = std::collections::HashSet::with_capacity(list.len());
    for (i, s) in list.iter().enumerate() {
        let field = format!("allowed_apps[{i}]");
        match AppSlug::parse_field(&field, s) {
            Ok(slug) if seen.insert(slug.clone()) => slugs.push(slug),
            Ok(slug) => errors.push(field, format!("lists {slug} a second time")),
            Err(e) => errors.0.push(e),
        }
    }
    if list.is_empty() {
        errors.push("allowed_apps", "must name at least one application");
    }
    Some(slugs)
}

/// Whether two lists hold the same slugs, whatever their order (each list holds a slug
/// at most once).
fn same_set(a: &[AppSlug], b: &[AppSlug]) -> bool {
    a.len() == b.len() && a.iter().all(|s| b.contains(s))
}

/// The algorithm's own parameters: each is set exactly when the algorithm uses it.
#[derive(Default)]
struct Params {
    rate: Option<Rate>,
    window_ms: Option<Millis>,
    lease_ttl_ms: Option<Millis>,
}

impl Params {
    /// Each algorithm takes exactly its own parameters: one it does not use is an error (a
    /// typo or a misunderstanding), one it needs must be given or kept from `current`.
    fn of(
        errors: &mut FieldErrors,
        algorithm: Option<Algorithm>,
        input: &PolicyInput,
        current: Option<&PolicySpec>,
    ) -> Self {
        let Some(algorithm) = algorithm else {
            return Self::default();
        };
        Self {
            rate: param(
                errors,
                algorithm,
                Param::Rate,
                input.rate,
                current.and_then(|c| c.rate),
                Rate::parse_field,
            ),
            window_ms: param(
                errors,
                algorithm,
                Param::WindowMs,
                input.window_ms,
                current.and_then(|c| c.window_ms),
                Millis::parse_field,
            ),
            lease_ttl_ms: param(
                errors,
                algorithm,
                Param::LeaseTtlMs,
                input.lease_ttl_ms,
                current.and_then(|c| c.lease_ttl_ms),
                Millis::parse_field,
            ),
        }
    }
}

/// One algorithm-specific parameter: the input's value when the algorithm uses it (else
/// the current one, when the policy already had it), an error when the algorithm does not
/// use it but the input sets it, and nothing otherwise.
fn param<V: Copy, T>(
    errors: &mut FieldErrors,
    algorithm: Algorithm,
    param: Param,
    given: Option<V>,
    current: Option<T>,
    parse: impl Fn(&str, V) -> Result<T, FieldError>,
) -> Option<T> {
    let field = param.field();
    match (algorithm.uses(param), given, current) {
        (true, Some(v), _) => errors.check(parse(field, v)),
        (true, None, Some(current)) => Some(current),
        (true, None, None) => {
            errors.push(field, format!("is required for {}", algorithm.as_str()));
            None
        }
        (false, Some(_), _) => {
            errors.push(
                field,
                format!(
                    "is not used by {}, which allows {}",
                    algorithm.as_str(),
                    algorithm.summary()
                ),
            );
            None
        }
        (false, None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(f: impl FnOnce(&mut PolicyInput)) -> PolicyInput {
        let mut input = PolicyInput {
            name: Some("orders.create".into()),
            owner_app: Some("shop".into()),
            rate: Some(2.0),
            max_permits: Some(10),
            ..PolicyInput::default()
        };
        f(&mut input);
        input
    }

    #[test]
    fn a_new_policy_takes_the_defaults() {
        let spec = new_policy(&input(|_| {})).unwrap();
        assert_eq!(spec.algorithm, Algorithm::TokenBucket);
        assert_eq!(spec.failure_mode, FailureMode::Closed);
        assert!(spec.enabled);
        assert_eq!(spec.allowed_apps, vec![spec.owner_app.clone()]);
    }

    #[test]
    fn an_application_allowed_twice_is_named() {
        let errors = new_policy(&input(|i| {
            i.allowed_apps = Some(vec!["shop".into(), "web".into(), "shop".into()]);
        }))
        .unwrap_err();
        assert_eq!(
            errors.0,
            [FieldError::new(
                "allowed_apps[2]",
                "lists shop a second time"
            )]
        );
    }

    #[test]
    fn every_invalid_field_is_named_in_form_order() {
        let errors = new_policy(&input(|i| {
            i.name = None;
            i.max_permits = Some(0);
            i.window_ms = Some(1000);
            i.version = Some(3);
        }))
        .unwrap_err();
        let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["name", "max_permits", "window_ms", "version"]);
    }

    #[test]
    fn a_patch_keeps_what_it_does_not_set_and_never_renames() {
        let current = new_policy(&input(|_| {})).unwrap();
        let patched = patched_policy(
            &PolicyInput {
                max_permits: Some(20),
                ..PolicyInput::default()
            },
            &current,
        )
        .unwrap();
        assert_eq!(patched.max_permits.get(), 20);
        assert_eq!(patched.rate, current.rate);
        let renamed = PolicyInput {
            name: Some("other".into()),
            ..PolicyInput::default()
        };
        assert_eq!(
            patched_policy(&renamed, &current).unwrap_err().0[0].field,
            "name"
        );
        let switched = PolicyInput {
            algorithm: Some("fixed_window".into()),
            ..PolicyInput::default()
        };
        let errors = patched_policy(&switched, &current).unwrap_err();
        let fields: Vec<&str> = errors.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["window_ms"],
            "the rate is dropped, the window is needed"
        );
    }
}
