//! The values of the IETF RateLimit headers (draft-ietf-httpapi-ratelimit-headers,
//! structured-field form) and of `Retry-After`, for a decision: written once here, so the
//! HTTP acquire and Envoy's rate limit service (gRPC) tell a client the same thing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64_STANDARD;

use crate::domain::PolicyName;
use ratekeeper_limiter::Decided;

use super::Partition;

/// `"<name>";r=<remaining>;t=<s>`, the value of `RateLimit`, where `t` is the time to
/// retry when denied, else the time until the bucket is full; a keyed bucket adds its
/// partition key `pk`.
pub fn ratelimit_value(
    name: &PolicyName,
    decided: &Decided,
    partition: Option<&Partition>,
) -> String {
    let t = if !decided.decision.allowed() {
        whole_seconds(decided.retry_after_ms)
    } else {
        whole_seconds(decided.reset_after_ms)
    };
    let mut digits = itoa::Buffer::new();
    let mut current = quoted_name(name, 32);
    current.push_str(";r=");
    current.push_str(digits.format(decided.remaining));
    current.push_str(";t=");
    current.push_str(digits.format(t));
    if let Some(partition) = partition {
        // The caller's bucket, as a structured-field byte sequence (any key is safe so).
        current.push_str(";pk=:");
        BASE64_STANDARD.encode_string(partition.as_str(), &mut current);
        current.push(':');
    }
    current
}

/// `"<name>";q=<limit>`, the value of `RateLimit-Policy`.
pub fn policy_value(name: &PolicyName, limit: i64) -> String {
    let mut value = quoted_name(name, 24);
    value.push_str(";q=");
    value.push_str(itoa::Buffer::new().format(limit));
    value
}

/// The value of `Retry-After` on a denial: whole seconds, rounded up, at least 1.
pub fn retry_after_seconds(decided: &Decided) -> i64 {
    whole_seconds(decided.retry_after_ms).max(1)
}

/// The policy's name as a structured-field string, in a string with room for `more` bytes
/// after it: a header value is built in place and handed over without a copy. Policy
/// names are [A-Za-z0-9._:/-]: safe inside a structured-field string as they are.
fn quoted_name(name: &PolicyName, more: usize) -> String {
    let name = name.as_str();
    let mut value = String::with_capacity(name.len() + 2 + more);
    value.push('"');
    value.push_str(name);
    value.push('"');
    value
}

/// Milliseconds as whole seconds, rounded up (never below 0).
pub fn whole_seconds(ms: i64) -> i64 {
    (ms.max(0) + 999) / 1000
}
