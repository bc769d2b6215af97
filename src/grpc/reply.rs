//! A `ShouldRateLimit` reply: one status per descriptor, in order, and the overall code
//! (`OVER_LIMIT` when any descriptor is); the headers Envoy adds to the response are the
//! HTTP acquire's (`RateLimit-Policy`, `RateLimit`, and `Retry-After` when over the limit),
//! written by `crate::acquire::headers`.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::google::protobuf::Duration;

use crate::acquire::{Acquired, Outcome, Partition, headers};
use crate::snapshot::PolicyEntry;
use ratekeeper_limiter::{BucketLimits, Decided, Decision};

use super::current_limit::current_limit;

/// The status of a descriptor that names no policy: `OK`, without a limit.
pub fn unmatched() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        ..DescriptorStatus::default()
    }
}

/// The status of a descriptor whose policy fails closed while Redis cannot be reached.
pub fn unavailable(policy: &PolicyEntry) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::OverLimit as i32,
        current_limit: Some(current_limit(
            &policy.config.name,
            &BucketLimits::of(&policy.config),
        )),
        ..DescriptorStatus::default()
    }
}

/// The status of a descriptor that was answered, and the headers it brings.
pub fn decided(policy: &PolicyEntry, acquired: &Acquired) -> (DescriptorStatus, Vec<HeaderValue>) {
    let name = &policy.config.name;
    let limits = match &acquired.partition {
        Some(partition) => policy.limits_for(partition.as_str()),
        None => BucketLimits::of(&policy.config),
    };
    let limit = Some(current_limit(name, &limits));
    match &acquired.outcome {
        Outcome::Degraded { limit: quota, .. } => {
            // Granted without Redis: the bucket's state is unknown, its quota is not.
            let status = DescriptorStatus {
                code: Code::Ok as i32,
                current_limit: limit,
                ..DescriptorStatus::default()
            };
            let headers = quota
                .map(|q| vec![header("ratelimit-policy", headers::policy_value(name, q))])
                .unwrap_or_default();
            (status, headers)
        }
        Outcome::Decided(decided) => {
            let denied = !decided.decision.allowed();
            // A blocked policy's limit is Envoy's limit of 0: nothing passes.
            let limit = limit.map(|mut l| {
                if decided.decision == Decision::Blocked {
                    l.requests_per_unit = 0;
                }
                l
            });
            let status = DescriptorStatus {
                code: if denied { Code::OverLimit } else { Code::Ok } as i32,
                current_limit: limit,
                limit_remaining: u32::try_from(decided.remaining.max(0)).unwrap_or(u32::MAX),
                duration_until_reset: Some(until_reset(decided)),
                quota: None,
            };
            (
                status,
                decided_headers(name, decided, acquired.partition.as_ref()),
            )
        }
    }
}

/// The headers of a decision, as the HTTP acquire sends them: none in shadow mode (a
/// client pacing itself by them would carry out the very limit shadow mode watches).
fn decided_headers(
    name: &crate::domain::PolicyName,
    decided: &Decided,
    partition: Option<&Partition>,
) -> Vec<HeaderValue> {
    if decided.decision == Decision::ShadowDenied {
        return Vec::new();
    }
    let mut headers = vec![
        header(
            "ratelimit-policy",
            headers::policy_value(name, decided.limit),
        ),
        header(
            "ratelimit",
            headers::ratelimit_value(name, decided, partition),
        ),
    ];
    if !decided.decision.allowed() {
        let seconds = headers::retry_after_seconds(decided);
        headers.push(header(
            "retry-after",
            itoa::Buffer::new().format(seconds).to_owned(),
        ));
    }
    headers
}

/// When the limit resets: the time to retry when denied, else until the bucket is full
/// (the `t` of the `RateLimit` header).
fn until_reset(decided: &Decided) -> Duration {
    let ms = if !decided.decision.allowed() {
        decided.retry_after_ms
    } else {
        decided.reset_after_ms
    }
    .max(0);
    Duration {
        seconds: ms / 1000,
        nanos: i32::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
    }
}

fn header(key: &str, value: String) -> HeaderValue {
    HeaderValue {
        key: key.to_owned(),
        value,
        raw_value: Vec::new(),
    }
}

/// The reply of these statuses (one per descriptor, in order) and headers.
pub fn response(statuses: Vec<DescriptorStatus>, headers: Vec<HeaderValue>) -> RateLimitResponse {
    let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
    RateLimitResponse {
        overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
        statuses,
        response_headers_to_add: headers,
        ..RateLimitResponse::default()
    }
}
