//! The errors of a call: one variant per kind of problem the server answers
//! (`application/problem+json`, RFC 9457), plus transport failures and set-up mistakes.

use std::fmt;

use serde::Deserialize;

use crate::decision::Decision;

/// An error answered by the server as `application/problem+json`, or made up from a
/// reply that was not one (then `type_uri` is `about:blank` and `detail` holds the body).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problem {
    /// The HTTP status of the reply.
    pub status: u16,
    /// The problem's `type`: `urn:ratekeeper:problem:<kind>`.
    pub type_uri: String,
    /// The problem's `title`, the same for every problem of one type.
    pub title: String,
    /// What went wrong this time, in words (`detail`).
    pub detail: Option<String>,
    /// The invalid fields, for `Invalid` and `BadRequest` (`errors`), in the server's order.
    pub errors: Vec<FieldError>,
}

/// One invalid field of a request: its name (e.g. `permits`, `all[1].key`) and why.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct FieldError {
    /// The field's name as the request spells it.
    #[serde(default)]
    pub field: String,
    /// Why it was refused.
    #[serde(default)]
    pub message: String,
}

impl Problem {
    /// The problem's kind: the part of `type_uri` after `urn:ratekeeper:problem:`.
    pub fn kind(&self) -> Option<&str> {
        self.type_uri.strip_prefix("urn:ratekeeper:problem:")
    }

    /// The first invalid field's name, when the server named any.
    pub fn field(&self) -> Option<&str> {
        self.errors.first().map(|e| e.field.as_str())
    }

    /// The problem from a reply's status and body: the body's fields when it is a
    /// problem document, else the status and the body as the detail.
    pub fn from_reply(status: u16, body: &str) -> Self {
        #[derive(Deserialize)]
        struct Wire {
            #[serde(rename = "type")]
            type_uri: Option<String>,
            title: Option<String>,
            detail: Option<String>,
            #[serde(default)]
            errors: Vec<FieldError>,
        }
        let reason = http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Unexpected status");
        match serde_json::from_str::<Wire>(body) {
            Ok(wire) => Self {
                status,
                type_uri: wire.type_uri.unwrap_or_else(|| "about:blank".to_owned()),
                title: wire.title.unwrap_or_else(|| reason.to_owned()),
                detail: wire.detail,
                errors: wire.errors,
            },
            Err(_) => {
                let body = body.trim();
                Self {
                    status,
                    type_uri: "about:blank".to_owned(),
                    title: reason.to_owned(),
                    detail: (!body.is_empty()).then(|| body.to_owned()),
                    errors: Vec::new(),
                }
            }
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.title)?;
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        }
        for error in &self.errors {
            write!(f, "\n  {}: {}", error.field, error.message)?;
        }
        Ok(())
    }
}

/// A request that could not be completed: no reply (refused, reset, timed out), or a
/// reply that could not be read. `Error::Transport` carries it where no decision can
/// stand in for the answer (refund, release, the admin API); acquires and checks
/// answer a degraded [`Decision`] instead.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct TransportError {
    message: String,
    timed_out: bool,
    #[source]
    source: Option<reqwest::Error>,
}

impl TransportError {
    pub(crate) fn new(message: impl Into<String>, source: Option<reqwest::Error>) -> Self {
        let timed_out = source.as_ref().is_some_and(reqwest::Error::is_timeout);
        Self {
            message: message.into(),
            timed_out,
            source,
        }
    }

    pub(crate) fn timeout(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            timed_out: true,
            source: None,
        }
    }

    /// Whether the call's timeout ran out.
    pub fn is_timeout(&self) -> bool {
        self.timed_out
    }

    /// Whether the server refused the connection (nothing listens there), after retries.
    pub fn is_connection_refused(&self) -> bool {
        self.source
            .as_ref()
            .is_some_and(crate::transport::is_refused)
    }

    /// Whether the server's TLS certificate was refused: its CA is not among the
    /// trusted roots (a server under a private CA wants [`crate::ClientBuilder::ca_file`]).
    pub fn is_untrusted_certificate(&self) -> bool {
        self.source
            .as_ref()
            .is_some_and(crate::transport::is_untrusted_certificate)
    }
}

/// Everything a call can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// 400: the request's body is not what the API takes (`urn:ratekeeper:problem:malformed`).
    #[error("bad request: {0}")]
    BadRequest(Problem),
    /// 401: no API key, or an unknown, revoked or expired one.
    #[error("unauthorized: {0}")]
    Unauthorized(Problem),
    /// 403: the key's application may not use this policy.
    #[error("forbidden: {0}")]
    Forbidden(Problem),
    /// 404: no such policy, or (release) no such lease held (`lease-not-held`).
    #[error("not found: {0}")]
    NotFound(Problem),
    /// 409: e.g. a release of a policy that hands out no leases (`not-a-lease-policy`), or
    /// an apply of a plan that changed since its dry run.
    #[error("conflict: {0}")]
    Conflict(Problem),
    /// 422: a field's value is refused (`urn:ratekeeper:problem:validation`); see
    /// [`Problem::errors`].
    #[error("invalid: {0}")]
    Invalid(Problem),
    /// 503: the server cannot decide now (its Redis is away and the policy fails closed).
    #[error("unavailable: {0}")]
    Unavailable(Problem),
    /// No reply could be had (see [`TransportError`]).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// Any other reply: another status, or a success whose body could not be read.
    #[error("unexpected reply: {0}")]
    Unexpected(Problem),
    /// A lease was not granted: the denial (or the degraded fail-closed decision).
    #[error("not granted: retry after {} ms", .0.retry_after_ms.unwrap_or(0))]
    Denied(Box<Decision>),
    /// The client could not be set up (its URL, its CA file, its HTTP stack).
    #[error(transparent)]
    Config(#[from] crate::transport::SetupError),
}

impl Error {
    /// The error for a reply with an error status.
    pub(crate) fn from_reply(status: u16, body: &str) -> Self {
        let problem = Problem::from_reply(status, body);
        match status {
            400 => Self::BadRequest(problem),
            401 => Self::Unauthorized(problem),
            403 => Self::Forbidden(problem),
            404 => Self::NotFound(problem),
            409 => Self::Conflict(problem),
            422 => Self::Invalid(problem),
            503 => Self::Unavailable(problem),
            _ => Self::Unexpected(problem),
        }
    }

    /// The server's problem, for the variants that carry one.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::BadRequest(p)
            | Self::Unauthorized(p)
            | Self::Forbidden(p)
            | Self::NotFound(p)
            | Self::Conflict(p)
            | Self::Invalid(p)
            | Self::Unavailable(p)
            | Self::Unexpected(p) => Some(p),
            _ => None,
        }
    }

    /// The variant's name, as the conformance scenarios name error types
    /// (`NotFound`, `TransportError`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "BadRequest",
            Self::Unauthorized(_) => "Unauthorized",
            Self::Forbidden(_) => "Forbidden",
            Self::NotFound(_) => "NotFound",
            Self::Conflict(_) => "Conflict",
            Self::Invalid(_) => "Invalid",
            Self::Unavailable(_) => "Unavailable",
            Self::Transport(_) => "TransportError",
            Self::Unexpected(_) => "UnexpectedResponse",
            Self::Denied(_) => "Denied",
            Self::Config(_) => "Config",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_status_maps_to_its_variant_with_the_problem() {
        let body = r#"{"type":"urn:ratekeeper:problem:validation","title":"Invalid input","status":422,"detail":"permits: too many","field":"permits","errors":[{"field":"permits","message":"too many"}]}"#;
        let error = Error::from_reply(422, body);
        assert_eq!(error.kind_name(), "Invalid");
        let problem = error.problem().unwrap();
        assert_eq!(problem.status, 422);
        assert_eq!(problem.kind(), Some("validation"));
        assert_eq!(problem.title, "Invalid input");
        assert_eq!(problem.detail.as_deref(), Some("permits: too many"));
        assert_eq!(problem.field(), Some("permits"));
        for (status, name) in [
            (400, "BadRequest"),
            (401, "Unauthorized"),
            (403, "Forbidden"),
            (404, "NotFound"),
            (409, "Conflict"),
            (422, "Invalid"),
            (503, "Unavailable"),
            (500, "UnexpectedResponse"),
            (418, "UnexpectedResponse"),
        ] {
            assert_eq!(
                Error::from_reply(status, "{}").kind_name(),
                name,
                "{status}"
            );
        }
    }

    #[test]
    fn a_reply_that_is_not_a_problem_keeps_its_body_as_the_detail() {
        let error = Error::from_reply(502, "<html>bad gateway</html>\n");
        let Error::Unexpected(problem) = error else {
            panic!("{error:?}")
        };
        assert_eq!(problem.type_uri, "about:blank");
        assert_eq!(problem.title, "Bad Gateway");
        assert_eq!(problem.detail.as_deref(), Some("<html>bad gateway</html>"));
        assert_eq!(
            problem.to_string(),
            "502 Bad Gateway: <html>bad gateway</html>"
        );
    }
}
