//! One policy of a file made into a validated spec, with the same checks as the API
//! (`new_policy`), its errors named by the file's own field names.

use crate::control::{DescriptorInput, OverrideInput, PolicyInput, new_policy};
use crate::domain::{DisplayUnits, PolicySpec};

use super::format::{AppDocument, FileOverride, FilePolicy};
use super::units::{parse_duration, parse_rate};

/// The policy as a spec, or its errors as (field in the file, message).
pub(super) fn checked(
    app: &AppDocument,
    policy: &FilePolicy,
) -> Result<PolicySpec, Vec<(String, String)>> {
    let mut errors = Vec::new();
    let mut units = DisplayUnits::default();
    let mut rate = None;
    if let Some(amount) = &policy.rate {
        match parse_rate(amount) {
            Ok((r, unit)) => (rate, units.rate) = (Some(r), unit),
            Err(m) => errors.push(("rate".to_owned(), m)),
        }
    }
    let mut duration = |field: &str, amount: &Option<_>, unit: &mut Option<_>| {
        let (ms, u) = match amount.as_ref().map(parse_duration)? {
            Ok(read) => read,
            Err(m) => {
                errors.push((field.to_owned(), m));
                return None;
            }
        };
        *unit = u;
        Some(ms)
    };
    let window_ms = duration("window", &policy.window, &mut units.window);
    let lease_ttl_ms = duration("lease", &policy.lease, &mut units.lease_ttl);
    let overrides = policy
        .overrides
        .iter()
        .enumerate()
        .map(|(i, o)| override_input(i, o, &mut errors))
        .collect();
    if !errors.is_empty() {
        return Err(errors);
    }
    let input = PolicyInput {
        name: Some(policy.name.clone()),
        owner_app: Some(app.app.clone()),
        algorithm: policy.algorithm.clone(),
        rate,
        max_permits: Some(policy.max_permits),
        window_ms,
        lease_ttl_ms,
        allowed_apps: policy.allowed_apps.clone(),
        failure_mode: policy.failure_mode.clone(),
        enabled: policy.enabled,
        mode: policy.mode.clone(),
        description: policy.description.clone(),
        scope: policy.scope.clone(),
        overrides: Some(overrides),
        descriptors: Some(
            policy
                .descriptors
                .iter()
                .map(|d| DescriptorInput {
                    domain: d.domain.clone(),
                    entries: Some(d.entries.clone()),
                    replaces: (!d.replaces.is_empty()).then(|| d.replaces.clone()),
                })
                .collect(),
        ),
        version: None,
        units: Some(units),
        unreadable: Default::default(),
    };
    new_policy(&input).map_err(|found| {
        found
            .0
            .into_iter()
            .map(|e| (file_field(&e.field), e.message))
            .collect()
    })
}

fn override_input(i: usize, o: &FileOverride, errors: &mut Vec<(String, String)>) -> OverrideInput {
    let field = |name: &str| format!("overrides[{i}].{name}");
    let rate = read(errors, field("rate"), o.rate.as_ref().map(parse_rate));
    let window_ms = read(
        errors,
        field("window"),
        o.window.as_ref().map(parse_duration),
    );
    let lease_ttl_ms = read(errors, field("lease"), o.lease.as_ref().map(parse_duration));
    OverrideInput {
        matches: Some(o.matches.clone()),
        max_permits: o.max_permits,
        rate: rate.map(|(r, _)| r),
        window_ms: window_ms.map(|(ms, _)| ms),
        lease_ttl_ms: lease_ttl_ms.map(|(ms, _)| ms),
    }
}

/// An amount read, if given; its error recorded under `field`.
fn read<T>(
    errors: &mut Vec<(String, String)>,
    field: String,
    amount: Option<Result<T, String>>,
) -> Option<T> {
    match amount? {
        Ok(value) => Some(value),
        Err(message) => {
            errors.push((field, message));
            None
        }
    }
}

/// The API's name of a field as the file names it.
fn file_field(api_field: &str) -> String {
    let field = api_field
        .replace("window_ms", "window")
        .replace("lease_ttl_ms", "lease");
    if field == "owner_app" {
        "app".into()
    } else {
        field
    }
}
