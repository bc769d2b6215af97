//! `POST /v1/refund`: gives back permits that a grant took but the work did not use (a
//! cost known only afterwards). A bucket is refilled by at most that much, never above its
//! capacity; a window's count is lowered, never below 0. Concurrency policies keep
//! `POST /v1/release`.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use utoipa::ToSchema;

use super::acquire::{caller_key, refused, render};
use super::auth::ApiClient;
use super::json::{ClientJson, required_field};
use super::problem::Problem;
use crate::acquire::Acquirer;
use crate::domain::{FieldError, Permits, PolicyName};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefundRequest {
    /// The policy name the permits were acquired on.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
    pub resource: Option<String>,
    /// The permits to give back (required).
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, minimum = 1, maximum = 1000000000)]
    pub permits: Option<i64>,
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

#[utoipa::path(
    post, path = "/v1/refund", tag = "acquire",
    request_body = RefundRequest,
    responses(
        (status = 200, description = "Given back (nothing on a disabled policy: `enforced` false; `degraded` true when Redis is unreachable and the policy fails open): the bucket's remaining permits after it", body = super::acquire::AcquireReply),
        (status = 400, description = "The body does not fit: broken JSON or more after it, an unknown field, a wrong type or null, resource missing or not a policy name", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or bad API key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "This application may not use the resource", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such policy", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "permits missing, below 1 or above 1000000000; a concurrency policy (its leases are released); key missing on a per_key policy, given on another, or not 1-256 bytes of UTF-8 without control characters", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "Redis unreachable and the policy fails closed (or is not known to this instance)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("api_key" = []))
)]
pub async fn refund(
    acquirer: web::Data<Acquirer>,
    ApiClient(client): ApiClient,
    body: ClientJson<RefundRequest>,
) -> Result<HttpResponse, Problem> {
    let body = body.0;
    let name = required_field("resource", body.resource, |r| {
        PolicyName::parse_field("resource", &r)
    })?;
    let permits = body
        .permits
        .ok_or_else(|| FieldError::new("permits", "is required: how many to give back"))
        .and_then(Permits::parse)
        .map_err(|e| Problem::invalid(e.into()))?;
    let key = caller_key(body.key)?;
    match acquirer.refund(&client.app, &name, permits, key).await {
        Ok(acquired) => Ok(render(&name, &acquired)),
        Err(refusal) => Err(refused(refusal, &name, &client.app)),
    }
}
