//! What the server decided: [`Decision`] (one acquire, check or refund),
//! [`AllDecision`] (an all-or-nothing acquire), [`Released`] (a lease given back).

use serde::Deserialize;

/// The rate-limit headers of a reply, raw (draft-ietf-httpapi-ratelimit-headers'
/// structured fields, as the server wrote them), to pass on to one's own callers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// `RateLimit`: `"<policy>";r=<remaining>;t=<seconds>`.
    pub ratelimit: Option<String>,
    /// `RateLimit-Policy`: `"<policy>";q=<limit>`.
    pub ratelimit_policy: Option<String>,
    /// `Retry-After`, in whole seconds (denials only).
    pub retry_after: Option<String>,
}

impl RateLimitHeaders {
    /// The headers of a reply.
    pub(crate) fn from_map(headers: &http::HeaderMap) -> Self {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Self {
            ratelimit: get("ratelimit"),
            ratelimit_policy: get("ratelimit-policy"),
            retry_after: get("retry-after"),
        }
    }

    /// A header by its name, in any case (`RateLimit`, `ratelimit-policy`, `Retry-After`).
    pub fn get(&self, name: &str) -> Option<&str> {
        let value = if name.eq_ignore_ascii_case("ratelimit") {
            &self.ratelimit
        } else if name.eq_ignore_ascii_case("ratelimit-policy") {
            &self.ratelimit_policy
        } else if name.eq_ignore_ascii_case("retry-after") {
            &self.retry_after
        } else {
            return None;
        };
        value.as_deref()
    }

    /// The headers present, as (name, value) pairs with their canonical names.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("RateLimit", &self.ratelimit),
            ("RateLimit-Policy", &self.ratelimit_policy),
            ("Retry-After", &self.retry_after),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref()?)))
    }
}

/// One decision: the server's answer to an acquire, a check or a refund, or the client's
/// own (`cached`: a denial remembered; `degraded`: no answer could be had).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether the permits were granted (for a check: whether one would be).
    pub allowed: bool,
    /// The permits left; absent when the server could not tell (degraded).
    pub remaining: Option<i64>,
    /// The policy's capacity (or the caller's override's).
    pub limit: Option<i64>,
    /// In how many milliseconds the permits asked for will be there (0 when granted).
    pub retry_after_ms: Option<i64>,
    /// In how many milliseconds the bucket is full (or the window starts again).
    pub reset_after_ms: Option<i64>,
    /// `true` when no decision was made from the policy's state: the server's Redis was
    /// away (and the policy fails open), or the server could not be reached (and `allowed`
    /// is the call's `fail_open`).
    pub degraded: bool,
    /// `true` when the client answered from its denial cache, without a request.
    pub cached: bool,
    /// The version of the policy that decided.
    pub policy_version: Option<i64>,
    /// `false` when the policy is disabled: granted without counting.
    pub enforced: bool,
    /// `true` when the policy is in shadow mode and would have denied (it granted).
    pub shadow_denied: bool,
    /// A granted `concurrency` permit's lease, to give back with
    /// [`crate::Client::release`].
    pub lease_id: Option<String>,
    /// The reply's `RateLimit`, `RateLimit-Policy` and `Retry-After` headers, raw.
    pub headers: RateLimitHeaders,
}

/// The body of an acquire's (or a refund's) reply.
#[derive(Deserialize)]
pub(crate) struct WireDecision {
    allowed: bool,
    remaining: Option<i64>,
    limit: Option<i64>,
    retry_after_ms: Option<i64>,
    reset_after_ms: Option<i64>,
    policy_version: Option<i64>,
    enforced: Option<bool>,
    degraded: Option<bool>,
    shadow_denied: Option<bool>,
    lease_id: Option<String>,
}

impl WireDecision {
    pub(crate) fn into_decision(self, headers: RateLimitHeaders) -> Decision {
        Decision {
            allowed: self.allowed,
            remaining: self.remaining,
            limit: self.limit,
            retry_after_ms: self.retry_after_ms,
            reset_after_ms: self.reset_after_ms,
            degraded: self.degraded.unwrap_or(false),
            cached: false,
            policy_version: self.policy_version,
            enforced: self.enforced.unwrap_or(true),
            shadow_denied: self.shadow_denied.unwrap_or(false),
            lease_id: self.lease_id,
            headers,
        }
    }
}

/// The body of an all-or-nothing acquire's reply.
#[derive(Deserialize)]
pub(crate) struct WireAll {
    pub(crate) allowed: bool,
    pub(crate) results: Vec<WireDecision>,
}

impl Decision {
    /// The decision of a call that got no answer: `allowed` is the fail-open choice.
    pub(crate) fn degraded(allowed: bool) -> Self {
        Self {
            allowed,
            degraded: true,
            enforced: true,
            ..Self::default()
        }
    }

    /// Whether this is a denial the server made (not degraded, not a shadow grant).
    pub fn is_denial(&self) -> bool {
        !self.allowed && !self.degraded
    }
}

/// The answer to [`crate::Client::acquire_all`]: granted only when every item is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllDecision {
    /// Whether every item was granted (a denied call takes nothing from any bucket).
    pub allowed: bool,
    /// One decision per item, in the order asked.
    pub results: Vec<Decision>,
    /// `true` when no answer could be had: every result is degraded too.
    pub degraded: bool,
    /// The reply's headers: those of the most restrictive item.
    pub headers: RateLimitHeaders,
}

/// The answer to [`crate::Client::release`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Released {
    /// Always `true`: a lease not held is a [`crate::Error::NotFound`].
    pub released: bool,
    /// The permits given back.
    pub permits: i64,
    /// The permits free after the release.
    pub remaining: i64,
}
