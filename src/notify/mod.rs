//! Telling a team what its limits do, off the acquire path: webhooks signed by the
//! Standard Webhooks specification (`signature`), sent only to receivers the operator
//! allows (`receiver`).

pub mod receiver;
pub mod signature;
