//! Which policy each descriptor of a `ShouldRateLimit` names, whose bucket, and how many
//! permits it asks for. Resolved from the in-memory snapshot: no SQL, no Redis.
//!
//! A descriptor names its policy by its first entry when that entry's key is
//! `generic_key` (Envoy's `generic_key` action) or `resource`; the values of the entries
//! after it, in order and joined with `|`, are the bucket key of a `per_key` policy (the
//! bucket the HTTP acquire reaches with that `key`). A descriptor that names no policy is
//! answered `OK` without a limit, as Envoy expects of an unknown descriptor, and so is one
//! whose policy another descriptor's pattern replaces (envoyproxy/ratelimit's `replaces`).

use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

use crate::domain::{
    Algorithm, CallerKey, FieldError, MAX_DESCRIPTOR_ENTRIES, Permits, PolicyName, Scope,
};
use crate::snapshot::{DescriptorMatch, PolicyEntry, Snapshot};

/// The entry keys whose value names a policy.
const NAMING_KEYS: [&str; 2] = ["generic_key", "resource"];

/// What one descriptor asks about.
pub enum Target {
    /// No policy: `OK` without a limit.
    Unmatched,
    Policy(Named),
}

/// A descriptor that names a policy.
pub struct Named {
    pub policy: Arc<PolicyEntry>,
    /// The bucket's key, on a `per_key` policy.
    pub key: Option<CallerKey>,
    /// `None`: a check (`hits_addend` 0), which consumes nothing.
    pub permits: Option<Permits>,
    /// Which of the policy's patterns matched (`None`: named by the `generic_key`/`resource`
    /// convention).
    pub pattern: Option<usize>,
}

impl Named {
    /// The policies this descriptor's pattern replaces in the request.
    pub fn replaces(&self) -> &[PolicyName] {
        self.pattern
            .map_or(&[], |at| &self.policy.descriptors[at].replaces)
    }
}

impl Target {
    pub fn named(&self) -> Option<&Named> {
        match self {
            Self::Unmatched => None,
            Self::Policy(named) => Some(named),
        }
    }
}

/// Every descriptor's target, in order; the first invalid descriptor is an error naming
/// its field (`descriptors[2].hits_addend`).
pub fn resolve(snapshot: &Snapshot, request: &RateLimitRequest) -> Result<Vec<Target>, FieldError> {
    if request.descriptors.is_empty() {
        return Err(FieldError::new(
            "descriptors",
            "must hold at least one descriptor",
        ));
    }
    // Envoy's convention: a request's hits_addend of 0 is one hit (proto3 cannot tell an
    // unset number from 0); a descriptor's own, when set, wins, and there 0 is a check.
    let request_hits = u64::from(request.hits_addend.max(1));
    let mut targets = request
        .descriptors
        .iter()
        .enumerate()
        .map(|(index, descriptor)| {
            target(snapshot, &request.domain, index, descriptor, request_hits)
        })
        .collect::<Result<Vec<Target>, FieldError>>()?;
    replace(&mut targets);
    Ok(targets)
}

/// envoyproxy/ratelimit's `replaces`: a descriptor whose pattern replaces policies leaves
/// the request's other descriptors that reach one of them unlimited (answered as unknown).
/// All replacements are read from the request as it came, so their order does not matter.
fn replace(targets: &mut [Target]) {
    let replacing = |t: &Target| t.named().is_some_and(|n| !n.replaces().is_empty());
    if !targets.iter().any(replacing) {
        return;
    }
    let replaced: Vec<(usize, PolicyName)> = targets
        .iter()
        .enumerate()
        .filter_map(|(i, t)| Some((i, t.named()?.replaces())))
        .flat_map(|(i, names)| names.iter().map(move |n| (i, n.clone())))
        .collect();
    for (i, target) in targets.iter_mut().enumerate() {
        let gone = target.named().is_some_and(|n| {
            replaced
                .iter()
                .any(|(by, name)| *by != i && *name == n.policy.config.name)
        });
        if gone {
            *target = Target::Unmatched;
        }
    }
}

fn target(
    snapshot: &Snapshot,
    domain: &str,
    index: usize,
    descriptor: &RateLimitDescriptor,
    request_hits: u64,
) -> Result<Target, FieldError> {
    let field = |name: &str| format!("descriptors[{index}].{name}");
    if descriptor.entries.is_empty() {
        return Err(FieldError::new(
            field("entries"),
            "must hold at least one entry",
        ));
    }
    if descriptor.is_negative_hits {
        return Err(FieldError::new(
            field("is_negative_hits"),
            "is not taken: give permits back with POST /v1/refund",
        ));
    }
    if descriptor.limit.is_some() {
        return Err(FieldError::new(
            field("limit"),
            "is not taken: a descriptor's limits are its policy's, set in ratekeeper",
        ));
    }
    let Some((policy, key, pattern)) = named_policy(snapshot, domain, descriptor) else {
        return Ok(Target::Unmatched);
    };
    let name = policy.config.name.as_str();
    let key = match (policy.scope(), key) {
        (Scope::PerKey, Some(key)) => Some(CallerKey::parse_field(&field("entries"), &key)?),
        (Scope::PerKey, None) => {
            return Err(FieldError::new(
                field("entries"),
                format!(
                    "{name:?} is a per_key policy: the entries after the one naming it are \
                     the bucket's key, and there are none"
                ),
            ));
        }
        (Scope::Global | Scope::PerApp, Some(_)) => {
            return Err(FieldError::new(
                field("entries"),
                format!(
                    "{name:?} is not a per_key policy: a descriptor naming it has no \
                     entries after the one naming it"
                ),
            ));
        }
        (Scope::Global | Scope::PerApp, None) => None,
    };
    if policy.algorithm() == Algorithm::Concurrency {
        return Err(FieldError::new(
            field("entries"),
            format!(
                "{name:?} is a concurrency policy, whose leases are given back with \
                 POST /v1/release: a gateway cannot hold one"
            ),
        ));
    }
    let hits = descriptor
        .hits_addend
        .as_ref()
        .map_or(request_hits, |h| h.value);
    let permits = match hits {
        0 => None,
        hits => Some(
            Permits::parse(i64::try_from(hits).unwrap_or(i64::MAX))
                .map_err(|e| FieldError::new(field("hits_addend"), e.message))?,
        ),
    };
    Ok(Target::Policy(Named {
        policy,
        key,
        permits,
        pattern,
    }))
}

/// The policy a descriptor names, for a keyed bucket its key (not yet checked), and the
/// pattern that matched (none by the naming convention).
fn named_policy(
    snapshot: &Snapshot,
    domain: &str,
    descriptor: &RateLimitDescriptor,
) -> Option<(Arc<PolicyEntry>, Option<String>, Option<usize>)> {
    if let Some(found) = by_pattern(snapshot, domain, descriptor) {
        return Some((found.policy, found.key, Some(found.pattern)));
    }
    let (first, rest) = descriptor.entries.split_first()?;
    if !NAMING_KEYS.contains(&first.key.as_str()) {
        return None;
    }
    let policy = snapshot.policy(&first.value)?;
    let key = match rest {
        [] => None,
        [one] => Some(one.value.clone()),
        many => Some(
            many.iter()
                .map(|entry| entry.value.as_str())
                .collect::<Vec<_>>()
                .join("|"),
        ),
    };
    Some((policy, key, None))
}

/// The policies' own Envoy-style descriptor patterns (exact `key=value` entries, bare
/// `key` entries meaning one bucket per value), asked before the `generic_key`/`resource`
/// convention: the snapshot's index, Envoy's precedence. The entries are lent to it from
/// a fixed array (no allocation): no pattern has more than `MAX_DESCRIPTOR_ENTRIES`.
fn by_pattern(
    snapshot: &Snapshot,
    domain: &str,
    descriptor: &RateLimitDescriptor,
) -> Option<DescriptorMatch> {
    let count = descriptor.entries.len();
    if count == 0 || count > MAX_DESCRIPTOR_ENTRIES {
        return None;
    }
    let mut entries = [("", ""); MAX_DESCRIPTOR_ENTRIES];
    for (slot, entry) in entries.iter_mut().zip(&descriptor.entries) {
        *slot = (entry.key.as_str(), entry.value.as_str());
    }
    snapshot.descriptor_policy(domain, &entries[..count])
}
