//! Envoy's rate limit service (`envoy.service.ratelimit.v3.RateLimitService/
//! ShouldRateLimit`) over plaintext h2c, beside the HTTP server: a gateway (Envoy, Istio,
//! Envoy Gateway, Contour, Gloo, Emissary) asks it, and the answer is the HTTP acquire's,
//! taken by the same [`crate::acquire::Acquirer`] (the batcher, the denial cache, the
//! counts). Envoy's types and service trait come from the `envoy-types` crate.
//!
//! - `auth`: the API key in the call's metadata;
//! - `descriptors`: which policy and bucket each descriptor names, and its permits;
//! - `current_limit`: a policy's limits in Envoy's units;
//! - `reply`: the statuses and the headers to add;
//! - `all_or_nothing`: several descriptors, and checks (hits_addend 0);
//! - `server`: the service;
//! - `front_end`: its listener, its worker threads and its graceful stop.

mod all_or_nothing;
mod auth;
mod current_limit;
mod descriptors;
mod front_end;
mod reply;
mod server;

pub use all_or_nothing::decide_all;
pub use front_end::{GrpcFrontEnd, MakeLimiter};
pub use server::RateLimiter;
