//! The descriptors the one-acquire path does not take: several that name policies,
//! decided all or nothing (a denial anywhere takes nothing from any bucket), and checks
//! (`hits_addend` 0, which consume nothing), through `Acquirer::acquire_all`.
//!
//! The reply has a status per descriptor as a single acquire gives it; the headers are
//! those of the most restrictive descriptor, as the HTTP `all` acquire sends them. With
//! Redis away, each policy's own failure mode answers for its descriptor.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use ratekeeper_limiter::BucketLimits;
use tonic::Status;

use crate::acquire::{Acquirer, AllItem, AllRefused, Refusal};
use crate::domain::{AppSlug, CheckOrPermits, FailureMode, Mode};
use crate::snapshot::PolicyEntry;

use super::current_limit::current_limit;
use super::descriptors::{Named, Target};
use super::reply;
use super::server::refused;

/// Decides every descriptor of one call that names a policy, all or nothing.
pub async fn decide_all(
    acquirer: &Acquirer,
    app: &AppSlug,
    mut targets: Vec<Target>,
) -> Result<RateLimitResponse, Status> {
    // A policy deleted since the snapshot was read names nothing any more: its descriptor
    // is answered as unknown and the others decided again (at most once per descriptor).
    for _ in 0..=targets.len() {
        let (items, at): (Vec<AllItem>, Vec<usize>) = targets
            .iter()
            .enumerate()
            .filter_map(|(index, target)| Some((item(target.named()?), index)))
            .unzip();
        if items.is_empty() {
            return Ok(reply::response(
                targets.iter().map(|_| reply::unmatched()).collect(),
                Vec::new(),
            ));
        }
        match acquirer.acquire_all(app, &items).await {
            Ok(all) => {
                let mut statuses: Vec<DescriptorStatus> =
                    targets.iter().map(|_| reply::unmatched()).collect();
                let binding = all.most_restrictive().map(|(i, _)| i);
                let mut headers = Vec::new();
                for (i, acquired) in all.results.iter().enumerate() {
                    let Some(named) = targets[at[i]].named() else {
                        continue;
                    };
                    let (status, its_headers) = reply::decided(&named.policy, acquired);
                    statuses[at[i]] = status;
                    if binding == Some(i) {
                        headers = its_headers;
                    }
                }
                return Ok(reply::response(statuses, headers));
            }
            Err(AllRefused {
                index,
                refusal: Refusal::NoSuchPolicy,
            }) => targets[at[index]] = Target::Unmatched,
            Err(AllRefused {
                refusal: Refusal::Unavailable,
                ..
            }) => return Ok(without_redis(&targets)),
            Err(AllRefused { index, refusal }) => {
                let name = items[index].name.as_str();
                return Err(refused(refusal, at[index], name, app));
            }
        }
    }
    Err(Status::internal("the descriptors' policies kept vanishing"))
}

/// The all-or-nothing item of a descriptor that names a policy.
fn item(named: &Named) -> AllItem {
    AllItem {
        name: named.policy.config.name.clone(),
        permits: named
            .permits
            .map_or(CheckOrPermits::Check, CheckOrPermits::Take),
        key: named.key.clone(),
    }
}

/// Redis cannot be reached and a policy of the call fails closed: its descriptors are
/// over the limit, the others (failing open, disabled or in shadow mode) granted.
fn without_redis(targets: &[Target]) -> RateLimitResponse {
    let statuses = targets
        .iter()
        .map(|target| match target.named() {
            None => reply::unmatched(),
            Some(named) if fails_closed(&named.policy) => reply::unavailable(&named.policy),
            Some(named) => DescriptorStatus {
                code: Code::Ok as i32,
                current_limit: Some(current_limit(
                    &named.policy.config.name,
                    &BucketLimits::of(&named.policy.config),
                )),
                ..DescriptorStatus::default()
            },
        })
        .collect();
    reply::response(statuses, Vec::new())
}

/// Whether a policy refuses while Redis is away (as the acquirer's fallback decides; a
/// blocked one refuses whatever Redis does).
fn fails_closed(policy: &PolicyEntry) -> bool {
    policy.blocks()
        || (policy.config.enabled
            && policy.config.mode == Mode::Enforce
            && policy.failure_mode == FailureMode::Closed)
}
