//! The descriptors the one-acquire path does not take: several that name policies (decided
//! all or nothing), and checks (`hits_addend` 0, which consume nothing).
//!
//! NOT SERVED YET: this answers `UNIMPLEMENTED`. It is the one place where
//! `Acquirer::acquire_all(app, &[AllItem { name, permits (0 = check), key }])` (all or
//! nothing: a denial anywhere leaves every bucket as it was) and `Acquirer::check(app,
//! name, key)` plug in; the ignored tests in `tests/api/grpc/all_or_nothing.rs` hold the
//! behaviour they must bring: `AllRefused { index, refusal }` maps to the same statuses as
//! a refused single acquire (`server::refused`), and each result to `reply::decided`.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use tonic::Status;

use crate::acquire::Acquirer;
use crate::domain::AppSlug;

use super::descriptors::Target;

/// Decides every descriptor of one call all or nothing (checks included): for now,
/// `UNIMPLEMENTED` with what is not served.
pub async fn decide_all(
    _acquirer: &Acquirer,
    _app: &AppSlug,
    _targets: Vec<Target>,
) -> Result<RateLimitResponse, Status> {
    Err(Status::unimplemented(
        "not served yet: several descriptors naming policies in one call (decided all or \
         nothing), and hits_addend 0 (a check); send one descriptor per call, with hits \
         of at least 1",
    ))
}
