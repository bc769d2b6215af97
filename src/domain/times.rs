//! How a time leaves the server: RFC 3339 in UTC with milliseconds, in the APIs, the
//! console and the webhooks' events alike.

/// Unix ms as RFC 3339 (UTC).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
