//! Policies written as a file: one document per owner application, every field given
//! (overrides and descriptor patterns only when there are some), amounts in the units they were entered in.

use crate::control::{OverrideView, PolicyView};
use crate::domain::{DurationUnit, RateUnit};

use super::format::{AppDocument, FileDescriptor, FileOverride, FilePolicy};
use super::units::{render_duration, render_rate};

/// The documents for `policies`, grouped by owner, in the order the owners first appear.
pub fn documents(policies: &[PolicyView]) -> Vec<AppDocument> {
    let mut documents: Vec<AppDocument> = Vec::new();
    for policy in policies {
        let file_policy = file_policy(policy);
        match documents.iter_mut().find(|d| d.app == policy.owner_app) {
            Some(document) => document.policies.push(file_policy),
            None => documents.push(AppDocument {
                app: policy.owner_app.clone(),
                policies: vec![file_policy],
            }),
        }
    }
    documents
}

/// YAML: one document per application, separated by `---`.
pub fn to_yaml(policies: &[PolicyView]) -> Result<String, serde_norway::Error> {
    let parts = documents(policies)
        .iter()
        .map(serde_norway::to_string)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(parts.join("---\n"))
}

/// JSON: a list of the documents.
pub fn to_json(policies: &[PolicyView]) -> String {
    let mut text = serde_json::to_string_pretty(&documents(policies)).expect("documents serialise");
    text.push('\n');
    text
}

pub(super) fn file_policy(p: &PolicyView) -> FilePolicy {
    FilePolicy {
        name: p.name.clone(),
        algorithm: Some(p.algorithm.as_str().to_owned()),
        rate: p.rate.map(|r| render_rate(r, p.rate_unit)),
        max_permits: p.max_permits,
        window: p.window_ms.map(|w| render_duration(w, p.window_unit)),
        lease: p.lease_ttl_ms.map(|l| render_duration(l, p.lease_ttl_unit)),
        scope: Some(p.scope.as_str().to_owned()),
        allowed_apps: Some(p.allowed_apps.clone()),
        failure_mode: Some(p.failure_mode.as_str().to_owned()),
        enabled: Some(p.enabled),
        mode: Some(p.mode.as_str().to_owned()),
        description: Some(p.description.clone()),
        overrides: p
            .overrides
            .iter()
            .map(|o| file_override(o, p.rate_unit, p.window_unit, p.lease_ttl_unit))
            .collect(),
        descriptors: p
            .descriptors
            .iter()
            .map(|d| FileDescriptor {
                domain: d.domain.clone(),
                entries: d.entries.clone(),
                replaces: d.replaces.clone(),
            })
            .collect(),
    }
}

/// An override's amounts in its policy's units, where they read back exactly.
fn file_override(
    o: &OverrideView,
    rate_unit: Option<RateUnit>,
    window_unit: Option<DurationUnit>,
    lease_unit: Option<DurationUnit>,
) -> FileOverride {
    FileOverride {
        matches: o.matches.clone(),
        max_permits: o.max_permits,
        rate: o.rate.map(|r| render_rate(r, rate_unit)),
        window: o.window_ms.map(|w| render_duration(w, window_unit)),
        lease: o.lease_ttl_ms.map(|l| render_duration(l, lease_unit)),
    }
}
