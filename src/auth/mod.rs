//! Who is calling, and what they may do: secrets (keys, tokens), passwords, and the one
//! set of permission rules that the JSON API, the CLI and the console share; sign-in
//! attempts counted in memory while Redis cannot be reached (`local_buckets`).

mod local_buckets;
mod password;
mod permissions;
mod secrets;

pub use local_buckets::LocalBuckets;
pub use password::{PasswordError, hash_password, verify_password};
pub use permissions::{Actor, Permission};
pub use secrets::{Secret, SecretKind, digest_secret, hash_secret};
