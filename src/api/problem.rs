//! Errors as `application/problem+json` (RFC 9457), with a stable `type` per kind.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use crate::control::ControlError;
use crate::domain::{FieldError, FieldErrors};
use crate::telemetry::{Outage, warn_outage};

/// An error, as RFC 9457 problem details.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// Serialised as `urn:ratekeeper:problem:<kind>`.
    #[serde(rename = "type", serialize_with = "problem_type")]
    #[schema(value_type = String)]
    pub kind: &'static str,
    #[schema(value_type = String)]
    pub title: &'static str,
    pub status: u16,
    #[schema(value_type = String)]
    pub detail: Box<str>,
    /// The first invalid field, for clients that show one message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_version: Option<i64>,
}

impl Problem {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            title,
            status: status.as_u16(),
            detail: detail.into().into_boxed_str(),
            field: None,
            errors: Vec::new(),
            current_version: None,
        }
    }

    pub fn malformed(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "malformed",
            "Malformed request",
            detail,
        )
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Unauthorized",
            detail,
        )
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", "Forbidden", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            detail,
        )
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            "something went wrong on our side; it has been logged",
        )
    }

    /// 422 naming every invalid field.
    pub fn invalid(errors: FieldErrors) -> Self {
        let mut p = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
            "Invalid input",
            errors.to_string(),
        );
        p.field = errors.0.first().map(|e| e.field.clone());
        p.errors = errors.0;
        p
    }

    /// The same as [`Problem::invalid`] with another status and type (400 on acquire).
    pub fn with_fields(mut self, errors: FieldErrors) -> Self {
        self.field = errors.0.first().map(|e| e.field.clone());
        self.errors = errors.0;
        self
    }
}

fn problem_type<S: serde::Serializer>(kind: &&'static str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("urn:ratekeeper:problem:{kind}"))
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.title, self.detail)
    }
}

impl ResponseError for Problem {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code()).json(self);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == 401 {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<ControlError> for Problem {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::NotFound(what) => Self::not_found(format!("{what} not found")),
            ControlError::Forbidden => Self::forbidden("you are not permitted to do this"),
            ControlError::Invalid(errors) => Self::invalid(errors),
            ControlError::Conflict(detail) => {
                Self::new(StatusCode::CONFLICT, "conflict", "Conflict", detail)
            }
            e @ ControlError::LastOwner { .. } => Self::new(
                StatusCode::CONFLICT,
                "last-owner",
                "Last owner",
                e.to_string(),
            ),
            e @ ControlError::OwnsPolicies { .. } => Self::new(
                StatusCode::CONFLICT,
                "app-owns-policies",
                "Application owns policies",
                e.to_string(),
            ),
            ControlError::VersionConflict { current } => {
                let mut p = Self::new(
                    StatusCode::CONFLICT,
                    "version-conflict",
                    "Version conflict",
                    format!("the policy was changed by someone else; its version is now {current}"),
                );
                p.current_version = Some(current);
                p
            }
            ControlError::RedisUnavailable(cause) => {
                warn_outage(Outage::Redis, "admin api", &cause);
                Self::unavailable("redis is unreachable; try again shortly")
            }
            ControlError::DatabaseUnavailable(cause) => {
                warn_outage(Outage::Database, "admin api", &cause);
                Self::unavailable("the database is unreachable; try again shortly")
            }
            ControlError::Aborted(ref cause) => {
                tracing::warn!(error = format!("{cause:#}"), "transaction aborted");
                Self::new(StatusCode::CONFLICT, "conflict", "Conflict", e.to_string())
            }
            ControlError::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "internal error");
                Self::internal()
            }
        }
    }
}
