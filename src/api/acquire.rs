//! `POST /v1/acquire`: the hot path. The handler parses the request, lets the
//! [`Acquirer`] decide (no SQL, one Redis round trip), and renders the outcome.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::acquire_all::{self, AllItemRequest};
use super::auth::ApiClient;
use super::json::{ClientJson, required_field};
use super::problem::Problem;
use crate::acquire::headers as header_values;
use crate::acquire::{Acquired, Acquirer, Outcome, Partition, Refusal};
use crate::domain::{AppSlug, CallerKey, CheckOrPermits, FieldError, PolicyName};
use ratekeeper_limiter::{Decided, Decision};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireRequest {
    /// The policy name.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
    pub resource: Option<String>,
    /// Defaults to 1; 0 is a check (whether one permit would be granted now, with the
    /// remaining permits and reset times; nothing is taken).
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, minimum = 0, maximum = 1000000000)]
    pub permits: Option<i64>,
    /// Whose bucket, on a `per_key` policy (required there, refused elsewhere): 1 to 256
    /// bytes of UTF-8 without control characters, such as a user id or an address.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    pub key: Option<String>,
    /// Several acquires decided all or nothing, instead of `resource`, `permits` and `key`:
    /// 1 to 16 items, no two on the same resource and key. The reply is
    /// `{"allowed", "results": [one acquire reply per item, in order]}`, 200 when each is
    /// granted, else 429, and a denied call takes nothing from any bucket.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, min_items = 1, max_items = 16)]
    pub all: Option<Vec<AllItemRequest>>,
}

/// The reply of one acquire. (No other field in the schema: an `all` reply, which has
/// `results`, is told apart from it.)
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireReply {
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset_after_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<i64>,
    /// `false` when the policy is disabled: granted without counting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enforced: Option<bool>,
    /// `true` when Redis was unreachable and the policy fails open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degraded: Option<bool>,
    /// `true` when the policy is in shadow mode and would have denied this request: it is
    /// granted all the same (the numbers are what enforcing would have said).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow_denied: Option<bool>,
    /// `true` when the policy blocks every request (mode `block`): denied whatever the
    /// bucket holds, until an owner lifts the block; waiting does not help.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked: Option<bool>,
    /// A granted `concurrency` permit: give it back with `POST /v1/release`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
}

/// The one place a reply body is built from an outcome.
impl From<&Outcome> for AcquireReply {
    fn from(outcome: &Outcome) -> Self {
        match *outcome {
            Outcome::Decided(d) => Self {
                allowed: d.decision.allowed(),
                remaining: Some(d.remaining),
                limit: Some(d.limit),
                retry_after_ms: Some(d.retry_after_ms),
                reset_after_ms: Some(d.reset_after_ms),
                policy_version: Some(d.version),
                enforced: (d.decision == Decision::Unenforced).then_some(false),
                degraded: None,
                shadow_denied: (d.decision == Decision::ShadowDenied).then_some(true),
                blocked: (d.decision == Decision::Blocked).then_some(true),
                lease_id: d.lease.map(|l| l.to_string()),
            },
            Outcome::Degraded { limit, enforced } => Self {
                allowed: true,
                remaining: None,
                limit,
                retry_after_ms: None,
                reset_after_ms: None,
                policy_version: None,
                enforced: (!enforced).then_some(false),
                degraded: Some(true),
                shadow_denied: None,
                blocked: None,
                lease_id: None,
            },
        }
    }
}

/// The reply of `POST /v1/acquire`: one acquire's, or an `all` acquire's.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum AcquireReplies {
    One(AcquireReply),
    All(super::acquire_all::AcquireAllReply),
}

#[utoipa::path(
    post, path = "/v1/acquire", tag = "acquire",
    request_body = AcquireRequest,
    responses(
        (status = 200, description = "Granted (in shadow mode also where the limit would deny: `shadow_denied` true, no RateLimit headers); with `all`, every item granted", body = AcquireReplies),
        (status = 400, description = "The body does not fit: broken JSON or more after it, an unknown field, a wrong type or null, resource (or an item's) missing or not a policy name", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "This application may not use the resource (of an item: the detail names all[i])", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy (of an item: the detail names all[i])", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "permits below 0 or above the caller's max_permits; key missing on a per_key policy, given on another, or not 1-256 bytes of UTF-8 without control characters; all with resource, permits or key, with no item or more than 16, or two items on the same resource and key (the field names all[i])", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "Denied (with all: an item denied, nothing taken); Retry-After says when to retry", body = AcquireReplies),
        (status = 503, description = "Redis unreachable and the policy (an item's) fails closed (or is not known to this instance)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("api_key" = []))
)]
pub async fn acquire(
    acquirer: web::Data<Acquirer>,
    ApiClient(client): ApiClient,
    body: ClientJson<AcquireRequest>,
) -> Result<HttpResponse, Problem> {
    let body = body.0;
    if let Some(all) = body.all {
        if body.resource.is_some() || body.permits.is_some() || body.key.is_some() {
            return Err(Problem::invalid(
                FieldError::new(
                    "all",
                    "is instead of resource, permits and key: send either all or those",
                )
                .into(),
            ));
        }
        let items = acquire_all::parse_items(all)?;
        return acquire_all::acquire_all(&acquirer, &client.app, &items).await;
    }
    let name = required_field("resource", body.resource, |r| {
        PolicyName::parse_field("resource", &r)
    })?;
    let permits = CheckOrPermits::parse_field("permits", body.permits.unwrap_or(1))
        .map_err(|e| Problem::invalid(e.into()))?;
    let key = caller_key(body.key)?;
    let answer = match permits {
        CheckOrPermits::Take(permits) => acquirer.acquire(&client.app, &name, permits, key).await,
        CheckOrPermits::Check => acquirer.check(&client.app, &name, key).await,
    };
    match answer {
        Ok(acquired) => Ok(render(&name, &acquired)),
        Err(refusal) => Err(refused(refusal, &name, &client.app)),
    }
}

/// `Retry-After` of a denial: its retry time in whole seconds, at least 1.
pub(super) fn retry_after(decided: &Decided) -> HeaderValue {
    HeaderValue::from(header_values::retry_after_seconds(decided))
}

/// The `key` of a client API body, if any: 422 naming it when it cannot be one.
pub(super) fn caller_key(key: Option<String>) -> Result<Option<CallerKey>, Problem> {
    key.map(|k| CallerKey::parse_field("key", &k))
        .transpose()
        .map_err(|e| Problem::invalid(e.into()))
}

/// The problem a refused acquire (or release) answers.
pub(super) fn refused(refusal: Refusal, name: &PolicyName, app: &AppSlug) -> Problem {
    match refusal {
        Refusal::NoSuchPolicy => Problem::not_found(format!("no policy named {:?}", name.as_str())),
        Refusal::AppNotAllowed => Problem::forbidden(format!(
            "application {:?} may not acquire {:?}",
            app.as_str(),
            name.as_str()
        )),
        Refusal::PermitsAboveMax { limit } => Problem::invalid(
            FieldError::new(
                "permits",
                format!("must be at most the policy's max_permits ({limit})"),
            )
            .into(),
        ),
        Refusal::Unavailable => {
            Problem::unavailable("the limiter cannot reach redis and this policy fails closed")
        }
        Refusal::KeyRequired => Problem::invalid(
            FieldError::new(
                "key",
                format!(
                    "is required: {:?} is a per_key policy, with a bucket per key",
                    name.as_str()
                ),
            )
            .into(),
        ),
        Refusal::NotRefundable => Problem::invalid(
            FieldError::new(
                "resource",
                format!(
                    "{:?} is a concurrency policy: give its leases back with POST /v1/release",
                    name.as_str()
                ),
            )
            .into(),
        ),
        Refusal::KeyNotTaken => Problem::invalid(
            FieldError::new(
                "key",
                format!(
                    "is only for a per_key policy; {:?} is not one",
                    name.as_str()
                ),
            )
            .into(),
        ),
    }
}

/// 200 or 429 with the body, and on a decision the IETF RateLimit headers
/// (structured-field form) and, when denied, `Retry-After`.
pub(super) fn render(name: &PolicyName, acquired: &Acquired) -> HttpResponse {
    let outcome = &acquired.outcome;
    let reply = AcquireReply::from(outcome);
    let decided = match outcome {
        Outcome::Decided(decided) => decided,
        Outcome::Degraded { limit, .. } => {
            // The policy is known, its remaining permits are not (they live in Redis):
            // only the policy's quota is told.
            let mut response = HttpResponse::Ok().json(reply);
            if let Some(value) = limit.and_then(|limit| policy_header(name, limit)) {
                response
                    .headers_mut()
                    .insert(HeaderName::from_static("ratelimit-policy"), value);
            }
            return response;
        }
    };
    let denied = !decided.decision.allowed();
    let status = if denied {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    let mut response = HttpResponse::build(status).json(reply);
    if decided.decision == Decision::ShadowDenied {
        // No RateLimit headers: a client pacing itself by them would carry out the very
        // limit that shadow mode is there to watch (the body has the numbers).
        return response;
    }
    let headers = response.headers_mut();
    for (name, value) in ratelimit_headers(name, decided, acquired.partition.as_ref()) {
        headers.insert(name, value);
    }
    if denied {
        headers.insert(header::RETRY_AFTER, retry_after(decided));
    }
    response
}

/// `RateLimit-Policy: "<name>";q=<limit>` and `RateLimit: "<name>";r=<remaining>;t=<s>`
/// as header values (built in `crate::acquire::headers`, shared with gRPC).
pub(super) fn ratelimit_headers(
    name: &PolicyName,
    decided: &Decided,
    partition: Option<&Partition>,
) -> impl Iterator<Item = (HeaderName, HeaderValue)> {
    [
        (
            HeaderName::from_static("ratelimit-policy"),
            policy_header(name, decided.limit),
        ),
        (
            HeaderName::from_static("ratelimit"),
            HeaderValue::try_from(header_values::ratelimit_value(name, decided, partition)).ok(),
        ),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name, value?)))
}

/// `"<name>";q=<limit>`, the value of `RateLimit-Policy`.
fn policy_header(name: &PolicyName, limit: i64) -> Option<HeaderValue> {
    HeaderValue::try_from(header_values::policy_value(name, limit)).ok()
}
