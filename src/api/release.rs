//! `POST /v1/release`: gives a concurrency lease back, so its permits are free again at
//! once rather than when the lease expires.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::acquire::{caller_key, refused};
use super::auth::ApiClient;
use super::json::{ClientJson, required_field};
use super::problem::Problem;
use crate::acquire::{Acquirer, Refusal};
use crate::domain::{FieldError, PolicyName};
use ratekeeper_limiter::{LeaseId, ReleaseOutcome};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    /// The policy name the lease was acquired on.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
    pub resource: Option<String>,
    /// The `lease_id` of the acquire's reply.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, pattern = "^[0-9a-f]{32}$")]
    pub lease_id: Option<String>,
    /// The acquire's `key`, on a `per_key` policy.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    pub key: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReleaseReply {
    pub released: bool,
    /// Permits given back.
    pub permits: i64,
    /// Permits free after the release.
    pub remaining: i64,
}

#[utoipa::path(
    post, path = "/v1/release", tag = "acquire",
    request_body = ReleaseRequest,
    responses(
        (status = 200, description = "Released", body = ReleaseReply),
        (status = 400, description = "The body does not fit: broken JSON or more after it, an unknown field, a wrong type or null, resource or lease_id missing or malformed", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy, or no such lease held by this application (expired, already released, or another's)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The policy does not use leases", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "key missing on a per_key policy, given on another, or not 1-256 bytes of UTF-8 without control characters", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Redis unreachable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("api_key" = []))
)]
pub async fn release(
    acquirer: web::Data<Acquirer>,
    ApiClient(client): ApiClient,
    body: ClientJson<ReleaseRequest>,
) -> Result<HttpResponse, Problem> {
    let body = body.0;
    let name = required_field("resource", body.resource, |r| {
        PolicyName::parse_field("resource", &r)
    })?;
    let lease = required_field("lease_id", body.lease_id, |l| {
        LeaseId::parse(&l).ok_or_else(|| {
            FieldError::new("lease_id", "must be the 32 hex digits an acquire returned")
        })
    })?;
    let key = caller_key(body.key)?;
    match acquirer.release(&client.app, &name, lease, key).await {
        Ok(ReleaseOutcome::Released { remaining, permits }) => {
            Ok(HttpResponse::Ok().json(ReleaseReply {
                released: true,
                permits,
                remaining,
            }))
        }
        Ok(ReleaseOutcome::NoSuchPolicy) => Err(Problem::not_found(format!(
            "no policy named {:?}",
            name.as_str()
        ))),
        Ok(ReleaseOutcome::NotLeased(algorithm)) => Err(Problem::new(
            StatusCode::CONFLICT,
            "not-a-lease-policy",
            "Not a concurrency policy",
            format!(
                "policy {:?} uses {}, which hands out no leases",
                name.as_str(),
                algorithm.as_str()
            ),
        )),
        Ok(ReleaseOutcome::NotHeld) => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "lease-not-held",
            "Lease not held",
            "this application holds no such lease: it expired, was already released, or was never \
             acquired by this application",
        )),
        Err(Refusal::Unavailable) => Err(Problem::unavailable(
            "the limiter cannot reach redis; the lease expires by itself after its ttl",
        )),
        Err(refusal) => Err(refused(refusal, &name, &client.app)),
    }
}
