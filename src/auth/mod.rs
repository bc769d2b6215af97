//! Who is calling, and what they may do: secrets (keys, tokens), passwords, and the one
//! set of permission rules that the JSON API, the CLI and the console share; sign-in
//! attempts limited (`sign_in`); signing in through an OpenID provider (`oidc`).

pub mod oidc;
mod password;
mod permissions;
mod secrets;
pub mod sign_in;

pub use password::{PasswordError, hash_password, verify_password};
pub use permissions::{Actor, Permission, Source};
pub use secrets::{Secret, SecretKind, digest_secret, hash_secret};
pub use sign_in::LocalBuckets;
