//! Signing in through the company's OpenID Connect provider (authorization code with
//! PKCE): `flow` runs both legs for the console; `request` is the first leg (what the
//! browser is sent to the provider with, and what the server keeps until it returns);
//! `discovery` the provider as its discovery document describes it; `exchange` the code
//! redeemed for an ID token; `keys` the provider's published keys and the ID token's
//! signature checked with them; `claims` the checks of the ID token's claims once its
//! signature has been verified.

pub mod claims;
pub mod discovery;
pub mod exchange;
pub mod flow;
pub mod keys;
pub mod request;
