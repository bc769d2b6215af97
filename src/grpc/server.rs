//! The service: the API key, the descriptors, one decision through the [`Acquirer`], the
//! reply.

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use crate::acquire::{Acquirer, Refusal};
use crate::domain::{AppSlug, CallerKey, Permits};
use crate::snapshot::{PolicyEntry, Snapshot};
use crate::telemetry::Metrics;

use super::all_or_nothing::decide_all;
use super::descriptors::{self, Named, Target};
use super::{auth, reply};

/// Envoy's rate limit service over this instance's policies.
pub struct RateLimiter {
    /// The gRPC front end's own acquirer (its Redis connection, batcher and tally).
    acquirer: Acquirer,
    snapshot: Arc<Snapshot>,
    metrics: Arc<Metrics>,
}

impl RateLimiter {
    pub fn new(acquirer: Acquirer, snapshot: Arc<Snapshot>, metrics: Arc<Metrics>) -> Self {
        Self {
            acquirer,
            snapshot,
            metrics,
        }
    }

    async fn answer(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<RateLimitResponse, Status> {
        let client = auth::client(&self.acquirer, request.metadata()).await?;
        let request = request.into_inner();
        let mut targets = descriptors::resolve(&self.snapshot, &request)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let named = {
            let mut named = (0..targets.len()).filter(|&i| targets[i].named().is_some());
            (named.next(), named.next())
        };
        match named {
            (None, _) => Ok(reply::response(
                targets.iter().map(|_| reply::unmatched()).collect(),
                Vec::new(),
            )),
            // The fast path: one descriptor that takes permits, on the single acquire.
            (Some(index), None) => {
                match std::mem::replace(&mut targets[index], Target::Unmatched) {
                    Target::Policy(Named {
                        policy,
                        key,
                        permits: Some(permits),
                        ..
                    }) => {
                        let one = One {
                            index,
                            count: targets.len(),
                            policy,
                            key,
                            permits,
                        };
                        self.decide_one(&client.app, one).await
                    }
                    check => {
                        targets[index] = check;
                        decide_all(&self.acquirer, &client.app, targets).await
                    }
                }
            }
            _ => decide_all(&self.acquirer, &client.app, targets).await,
        }
    }

    /// The one descriptor of a call that names a policy (the others name none).
    async fn decide_one(&self, app: &AppSlug, one: One) -> Result<RateLimitResponse, Status> {
        let One {
            index,
            count,
            policy,
            key,
            permits,
        } = one;
        let name = &policy.config.name;
        let mut statuses: Vec<_> = (0..count).map(|_| reply::unmatched()).collect();
        let headers = match self.acquirer.acquire(app, name, permits, key).await {
            Ok(acquired) => {
                let (status, headers) = reply::decided(&policy, &acquired);
                statuses[index] = status;
                headers
            }
            // A policy deleted since the snapshot was read names nothing any more.
            Err(Refusal::NoSuchPolicy) => Vec::new(),
            Err(Refusal::Unavailable) => {
                statuses[index] = reply::unavailable(&policy);
                Vec::new()
            }
            Err(refusal) => return Err(refused(refusal, index, name.as_str(), app)),
        };
        Ok(reply::response(statuses, headers))
    }
}

/// The one descriptor (at `index` of `count`) that names a policy and takes permits.
struct One {
    index: usize,
    count: usize,
    policy: Arc<PolicyEntry>,
    key: Option<CallerKey>,
    permits: Permits,
}

/// The gRPC status of an acquire refused before any decision (a failing-closed outage
/// and an unknown policy are statuses of their descriptor instead).
pub fn refused(refusal: Refusal, index: usize, policy: &str, app: &AppSlug) -> Status {
    match refusal {
        Refusal::AppNotAllowed => Status::permission_denied(format!(
            "application {:?} may not acquire {policy:?} (descriptors[{index}])",
            app.as_str()
        )),
        Refusal::PermitsAboveMax { limit } => Status::invalid_argument(format!(
            "descriptors[{index}].hits_addend: must be at most the max_permits of {policy:?} \
             ({limit})"
        )),
        Refusal::KeyRequired | Refusal::KeyNotTaken => Status::invalid_argument(format!(
            "descriptors[{index}].entries: do not fit the scope of {policy:?}"
        )),
        Refusal::NotRefundable => Status::invalid_argument(format!(
            "descriptors[{index}]: {policy:?} is a concurrency policy, whose leases are \
             released, not refunded"
        )),
        Refusal::NoSuchPolicy => Status::not_found(format!("no policy named {policy:?}")),
        Refusal::Unavailable => {
            Status::unavailable("the limiter cannot reach redis and this policy fails closed")
        }
    }
}

#[tonic::async_trait]
impl RateLimitService for RateLimiter {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let started = Instant::now();
        let answer = self.answer(request).await;
        self.metrics
            .grpc_request_seconds
            .observe(started.elapsed().as_secs_f64());
        answer.map(Response::new)
    }
}
