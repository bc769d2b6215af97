//! The gRPC load generator: Envoy's `ShouldRateLimit` with one descriptor, asked by a
//! number of concurrent streams spread over a few HTTP/2 connections for a duration, as a
//! gateway in front of many requests asks it. Its figures have wrk's shape (req/s, p50,
//! p99, requests, answers that are not OK), so a gRPC run sits in the rounds beside the
//! HTTP ones and is measured the same way (CPU per request of each process).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

use crate::wrk::WrkFigures;

/// A gRPC run to make.
pub struct GrpcRun {
    /// `http://127.0.0.1:PORT`
    pub address: String,
    pub api_key: String,
    /// The descriptor's entries, in order (e.g. `generic_key` = the policy's name).
    pub entries: Vec<(String, String)>,
    /// Concurrent calls in flight (each a loop of one call after the other).
    pub streams: usize,
    /// HTTP/2 connections the streams share.
    pub connections: usize,
    pub duration: Duration,
}

/// What one stream saw.
#[derive(Default)]
struct StreamTally {
    /// Each call's latency, in µs.
    latencies_us: Vec<u32>,
    /// Calls answered OVER_LIMIT or with an error status (wrk's "non-2xx").
    not_ok: u64,
    /// Calls that failed on the connection (wrk's socket errors).
    errors: u64,
}

/// Runs the load; its figures. Fails only when no connection can be made.
pub async fn run(run: &GrpcRun) -> Result<WrkFigures> {
    let mut channels = Vec::with_capacity(run.connections.max(1));
    for _ in 0..run.connections.max(1) {
        // One endpoint each: a channel is one HTTP/2 connection.
        let channel = Endpoint::from_shared(run.address.clone())
            .context("the gRPC address")?
            .tcp_nodelay(true)
            .connect()
            .await
            .with_context(|| format!("connecting to the gRPC service at {}", run.address))?;
        channels.push(channel);
    }
    let authorization: MetadataValue<_> = format!("Bearer {}", run.api_key)
        .parse()
        .context("the API key as metadata")?;
    let request = RateLimitRequest {
        domain: "bench".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: run
                .entries
                .iter()
                .map(|(key, value)| Entry {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
            ..Default::default()
        }],
        hits_addend: 1,
    };
    let deadline = Instant::now() + run.duration;
    let started = Instant::now();
    let tasks: Vec<_> = (0..run.streams)
        .map(|i| {
            let channel = channels[i % channels.len()].clone();
            let request = request.clone();
            let authorization = authorization.clone();
            tokio::spawn(stream(channel, request, authorization, deadline))
        })
        .collect();
    let mut tally = StreamTally::default();
    for task in tasks {
        let one = task.await.context("a gRPC stream panicked")?;
        tally.latencies_us.extend(one.latencies_us);
        tally.not_ok += one.not_ok;
        tally.errors += one.errors;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(figures(tally, elapsed))
}

/// One stream: a call, its answer, the next call, until the deadline.
async fn stream(
    channel: Channel,
    request: RateLimitRequest,
    authorization: MetadataValue<tonic::metadata::Ascii>,
    deadline: Instant,
) -> StreamTally {
    let mut client = RateLimitServiceClient::new(channel);
    let mut tally = StreamTally::default();
    while Instant::now() < deadline {
        let mut call = tonic::Request::new(request.clone());
        call.metadata_mut()
            .insert("authorization", authorization.clone());
        let sent = Instant::now();
        let answer = client.should_rate_limit(call).await;
        let took = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
        match answer {
            Ok(reply) => {
                tally.latencies_us.push(took);
                if reply.into_inner().overall_code != Code::Ok as i32 {
                    tally.not_ok += 1;
                }
            }
            Err(status) if status.code() == tonic::Code::Unavailable => tally.errors += 1,
            Err(_) => {
                tally.latencies_us.push(took);
                tally.not_ok += 1;
            }
        }
    }
    tally
}

fn figures(mut tally: StreamTally, elapsed_s: f64) -> WrkFigures {
    tally.latencies_us.sort_unstable();
    let requests = tally.latencies_us.len() as u64;
    let percentile = |p: f64| {
        let n = tally.latencies_us.len();
        (n > 0).then(|| {
            let at = ((n as f64 * p).ceil() as usize).clamp(1, n) - 1;
            f64::from(tally.latencies_us[at]) / 1000.0
        })
    };
    WrkFigures {
        rps: (elapsed_s > 0.0).then(|| requests as f64 / elapsed_s),
        p50_ms: percentile(0.50),
        p99_ms: percentile(0.99),
        non_2xx: tally.not_ok,
        requests: Some(requests),
        socket_errors: tally.errors,
        walks: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_sorted_latencies() {
        let tally = StreamTally {
            latencies_us: (1..=100).rev().map(|ms| ms * 1000).collect(),
            not_ok: 3,
            errors: 1,
        };
        let f = figures(tally, 2.0);
        assert_eq!(f.requests, Some(100));
        assert_eq!(f.rps, Some(50.0));
        assert_eq!(f.p50_ms, Some(50.0));
        assert_eq!(f.p99_ms, Some(99.0));
        assert_eq!((f.non_2xx, f.socket_errors), (3, 1));
    }

    #[test]
    fn no_answer_has_no_percentiles() {
        let f = figures(StreamTally::default(), 1.0);
        assert_eq!((f.p50_ms, f.p99_ms, f.requests), (None, None, Some(0)));
    }
}
