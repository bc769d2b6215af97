//! The Rust client of ratekeeper, a multi-tenant rate-limit server.
//!
//! ```no_run
//! use ratekeeper_client::{AcquireOptions, Client};
//!
//! # async fn run() -> Result<(), ratekeeper_client::Error> {
//! let client = Client::builder("http://127.0.0.1:8080", "rk_live_...").build()?;
//! let decision = client
//!     .acquire("orders.create", AcquireOptions::new().key("user-42"))
//!     .await?;
//! if !decision.allowed {
//!     println!("slow down: retry in {} ms", decision.retry_after_ms.unwrap_or(0));
//! }
//! # Ok(())
//! # }
//! ```
//!
//! - [`Client::acquire`] (and [`Client::check`], [`Client::acquire_all`],
//!   [`Client::refund`], [`Client::release`], [`Client::lease`]): a grant and a denial
//!   are both a [`Decision`]; the server's refusals of a request are [`Error`]s, one
//!   variant per kind of problem.
//! - Unreachable server: acquires and checks answer a degraded decision whose `allowed` is
//!   the call's fail-open choice (fail closed unless told); a request is sent again only
//!   when its connection was refused (it surely did not arrive), at most twice, within
//!   the call's timeout.
//! - The denial cache: a denial is remembered until its retry time, and the calls it
//!   answers are not sent ([`Decision::cached`]).
//! - [`RateLimitLayer`]: a tower layer for axum, hyper or any tower service.
//! - [`AdminClient`]: applies policy files (`POST /api/v1/apply`).
#![warn(missing_docs)]

mod admin;
mod cache;
mod client;
mod decision;
mod error;
pub mod layer;
mod lease;
pub mod transport;

pub use admin::{AdminClient, ApplyOptions};
pub use client::{
    AcquireOptions, AllItem, ApiKey, CallOptions, Client, ClientBuilder, DEFAULT_DENIAL_CACHE_SIZE,
    DEFAULT_TIMEOUT,
};
pub use decision::{AllDecision, Decision, RateLimitHeaders, Released};
pub use error::{Error, FieldError, Problem, TransportError};
pub use layer::RateLimitLayer;
pub use lease::Lease;

/// The README's code blocks, compiled as doc tests (its quick start among them).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
