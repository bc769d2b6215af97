//! The front end a decision came through: the metrics count decisions by it, so a
//! gateway's traffic (gRPC) and the applications' own calls (HTTP) are told apart.

/// Which API asked for a decision: the `protocol` label of `ratekeeper_decisions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `POST /v1/acquire` and its kin.
    Http,
    /// Envoy's rate limit service, `ShouldRateLimit`.
    Grpc,
}

impl Protocol {
    pub fn label(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Grpc => "grpc",
        }
    }
}
