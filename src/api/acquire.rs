//! `POST /v1/acquire`: the hot path. An API-key check against the in-memory snapshot and
//! one EVALSHA; no SQL.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::WorkerLimiter;
use super::json::ValidJson;
use super::problem::Problem;
use crate::acquire::CachedDenial;
use crate::auth::hash_secret;
use crate::domain::{Algorithm, FailureMode, FieldError, Permits, PolicyName};
use crate::limiter::{AcquireOutcome, Decision};
use crate::snapshot::KeyEntry;
use crate::state::AppState;
use crate::telemetry::METRICS;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireRequest {
    /// The policy name.
    pub resource: Option<String>,
    /// Defaults to 1.
    pub permits: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
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
    /// A granted `concurrency` permit: give it back with `POST /v1/release`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<String>,
}

/// The bearer token of a request, if it has one.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(actix_web::http::header::AUTHORIZATION)?;
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The live API key a client presented (checked against the in-memory snapshot).
pub fn client_key(req: &HttpRequest, state: &AppState) -> Result<Arc<KeyEntry>, Problem> {
    let presented = bearer(req)
        .ok_or_else(|| Problem::unauthorized("send your API key as Authorization: Bearer <key>"))?;
    state
        .snapshot
        .key(&hash_secret(presented))
        .ok_or_else(|| Problem::unauthorized("unknown or revoked API key"))
}

/// A required body field of the client APIs, parsed; missing or invalid is a 400 naming it.
pub fn required_field<T>(
    field: &'static str,
    value: Option<String>,
    parse: impl FnOnce(String) -> Result<T, FieldError>,
) -> Result<T, Problem> {
    let value = value.ok_or_else(|| {
        Problem::malformed(format!("{field} is required"))
            .with_fields(FieldError::new(field, "is required").into())
    })?;
    parse(value).map_err(|e| Problem::malformed(e.to_string()).with_fields(e.into()))
}

#[utoipa::path(
    post, path = "/v1/acquire", tag = "acquire",
    request_body = AcquireRequest,
    responses(
        (status = 200, description = "Granted", body = AcquireReply),
        (status = 429, description = "Denied; Retry-After says when to retry", body = AcquireReply),
        (status = 400, description = "Malformed request"),
        (status = 401, description = "No or bad API key"),
        (status = 403, description = "This application may not use the resource"),
        (status = 404, description = "No such policy"),
        (status = 422, description = "Invalid permits"),
        (status = 503, description = "Redis unreachable and the policy fails closed"),
    ),
    security(("api_key" = []))
)]
pub async fn acquire(
    req: HttpRequest,
    state: web::Data<AppState>,
    limiter: web::Data<WorkerLimiter>,
    body: ValidJson<AcquireRequest>,
) -> Result<HttpResponse, Problem> {
    let started = Instant::now();
    let key = client_key(&req, &state)?;
    key.last_used_ms
        .store(chrono::Utc::now().timestamp_millis(), Ordering::Relaxed);

    let body = body.0;
    let name = required_field("resource", body.resource, |r| {
        PolicyName::parse_field("resource", &r)
    })?;
    let permits =
        Permits::parse(body.permits.unwrap_or(1)).map_err(|e| Problem::invalid(e.into()))?;
    let brief = state.snapshot.policy(name.as_str());
    if let Some(brief) = brief
        && permits.get() > brief.max_permits
    {
        return Err(permits_above(brief.max_permits));
    }

    if let Some(known) = state.denials.check(&name, &key.app, permits.get()) {
        state.decisions.record(name.as_str(), false);
        METRICS
            .decisions
            .with_label_values(&[name.as_str(), "denied"])
            .inc();
        let response = denied_reply(&name, known);
        METRICS
            .acquire_seconds
            .observe(started.elapsed().as_secs_f64());
        return Ok(response);
    }

    // A policy not in the snapshot yet (created on another instance a moment ago) is
    // tried as a token bucket; the script redirects to the right algorithm.
    let algorithm = brief.map_or(Algorithm::TokenBucket, |b| b.algorithm);
    let outcome = limiter.0.acquire(&name, algorithm, permits, &key.app).await;
    let response = match outcome {
        Ok(AcquireOutcome::Decided {
            decision,
            remaining,
            retry_after_ms,
            reset_after_ms,
            limit,
            version,
            lease,
            algorithm: decided_by,
        }) => {
            let reply = AcquireReply {
                allowed: decision != Decision::Denied,
                remaining: Some(remaining),
                limit: Some(limit),
                retry_after_ms: Some(retry_after_ms),
                reset_after_ms: Some(reset_after_ms),
                policy_version: Some(version),
                enforced: (decision == Decision::Unenforced).then_some(false),
                degraded: None,
                lease_id: lease.map(|l| l.to_string()),
            };
            let outcome = match decision {
                Decision::Granted => "granted",
                Decision::Denied => "denied",
                Decision::Unenforced => "unenforced",
            };
            // A concurrency denial ends when any lease is released, which no retry time
            // foretells: those are never answered locally.
            if decision == Decision::Denied && decided_by != Algorithm::Concurrency {
                let known = CachedDenial {
                    remaining,
                    limit,
                    version,
                    retry_after_ms,
                    reset_after_ms,
                };
                state
                    .denials
                    .remember(&name, &key.app, permits.get(), known);
            }
            state
                .decisions
                .record(name.as_str(), decision != Decision::Denied);
            METRICS
                .decisions
                .with_label_values(&[name.as_str(), outcome])
                .inc();
            decided(
                &name,
                &reply,
                limit,
                reset_after_ms,
                retry_after_ms,
                decision,
            )
        }
        Ok(AcquireOutcome::NoSuchPolicy) => {
            return Err(Problem::not_found(format!(
                "no policy named {:?}",
                name.as_str()
            )));
        }
        Ok(AcquireOutcome::AppNotAllowed) => {
            return Err(Problem::forbidden(format!(
                "application {:?} may not acquire {:?}",
                key.app.as_str(),
                name.as_str()
            )));
        }
        Ok(AcquireOutcome::PermitsAboveMax { limit }) => return Err(permits_above(limit)),
        Err(e) => {
            let mode = brief.map_or(FailureMode::Closed, |b| b.failure_mode);
            tracing::warn!(policy = %name, error = %e, ?mode, "acquire could not reach redis");
            METRICS
                .decisions
                .with_label_values(&[name.as_str(), "degraded"])
                .inc();
            if mode == FailureMode::Closed {
                return Err(Problem::unavailable(
                    "the limiter cannot reach redis and this policy fails closed",
                ));
            }
            HttpResponse::Ok().json(AcquireReply {
                allowed: true,
                remaining: None,
                limit: brief.map(|b| b.max_permits),
                retry_after_ms: None,
                reset_after_ms: None,
                policy_version: None,
                enforced: None,
                degraded: Some(true),
                lease_id: None,
            })
        }
    };
    METRICS
        .acquire_seconds
        .observe(started.elapsed().as_secs_f64());
    Ok(response)
}

/// A 429 answered from a denial this instance already got for the same request.
fn denied_reply(name: &PolicyName, known: CachedDenial) -> HttpResponse {
    let reply = AcquireReply {
        allowed: false,
        remaining: Some(known.remaining),
        limit: Some(known.limit),
        retry_after_ms: Some(known.retry_after_ms),
        reset_after_ms: Some(known.reset_after_ms),
        policy_version: Some(known.version),
        enforced: None,
        degraded: None,
        lease_id: None,
    };
    decided(
        name,
        &reply,
        known.limit,
        known.reset_after_ms,
        known.retry_after_ms,
        Decision::Denied,
    )
}

fn permits_above(limit: i64) -> Problem {
    Problem::invalid(
        FieldError::new(
            "permits",
            format!("must be at most the policy's max_permits ({limit})"),
        )
        .into(),
    )
}

fn whole_seconds(ms: i64) -> i64 {
    (ms.max(0) + 999) / 1000
}

/// 200 or 429 with the IETF RateLimit headers (structured-field form).
fn decided(
    name: &PolicyName,
    reply: &AcquireReply,
    limit: i64,
    reset_after_ms: i64,
    retry_after_ms: i64,
    decision: Decision,
) -> HttpResponse {
    let status = if decision == Decision::Denied {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    let mut response = HttpResponse::build(status).json(reply);
    let headers = response.headers_mut();
    // Policy names are [A-Za-z0-9._:/-]: safe inside a structured-field string.
    let policy = format!("\"{name}\";q={limit}");
    let remaining = reply.remaining.unwrap_or(0);
    let t = if decision == Decision::Denied {
        whole_seconds(retry_after_ms)
    } else {
        whole_seconds(reset_after_ms)
    };
    let current = format!("\"{name}\";r={remaining};t={t}");
    if let Ok(v) = HeaderValue::from_str(&policy) {
        headers.insert(HeaderName::from_static("ratelimit-policy"), v);
    }
    if let Ok(v) = HeaderValue::from_str(&current) {
        headers.insert(HeaderName::from_static("ratelimit"), v);
    }
    if decision == Decision::Denied {
        headers.insert(
            actix_web::http::header::RETRY_AFTER,
            HeaderValue::from(whole_seconds(retry_after_ms).max(1)),
        );
    }
    response
}
