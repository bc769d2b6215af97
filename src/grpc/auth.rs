//! The caller of `ShouldRateLimit`: an application, by the API key in the call's metadata
//! `authorization: Bearer <key>` (Envoy sends it with `grpc_service.initial_metadata`),
//! checked against the in-memory snapshot like the HTTP API's.

use std::sync::Arc;

use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::acquire::{Acquirer, KeyRefused, REVOKED};
use crate::control::rfc3339;
use crate::snapshot::KeyEntry;

/// The live API key of the call (one created elsewhere a moment ago included, as on
/// HTTP); `UNAUTHENTICATED` without one, saying why.
pub async fn client(acquirer: &Acquirer, metadata: &MetadataMap) -> Result<Arc<KeyEntry>, Status> {
    let presented = metadata
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(bearer)
        .ok_or_else(|| {
            Status::unauthenticated(
                "send your API key as the metadata authorization: Bearer <key> \
                 (Envoy: grpc_service.initial_metadata)",
            )
        })?;
    let known = match acquirer.client(presented) {
        Err(KeyRefused::Unknown) => acquirer.announced_client(presented).await,
        known => known,
    };
    known.map_err(|refused| match refused {
        KeyRefused::Unknown => Status::unauthenticated("unknown or revoked API key"),
        KeyRefused::Revoked => Status::unauthenticated(REVOKED),
        KeyRefused::Expired { at_ms } => Status::unauthenticated(format!(
            "this API key expired at {}; use its replacement or make a new one",
            rfc3339(at_ms)
        )),
    })
}

/// The token of `Bearer <token>` (the scheme in any case, as on HTTP).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

#[cfg(test)]
mod tests {
    use super::bearer;

    #[test]
    fn the_token_follows_the_bearer_scheme_in_any_case() {
        assert_eq!(bearer("Bearer rk_key_1"), Some("rk_key_1"));
        assert_eq!(bearer("bearer  rk_key_1 "), Some("rk_key_1"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("rk_key_1"), None);
    }
}
