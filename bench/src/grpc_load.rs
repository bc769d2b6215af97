//! The gRPC load generator: Envoy's `ShouldRateLimit` with one descriptor, asked by a
//! number of concurrent streams spread over a few HTTP/2 connections for a duration, as a
//! gateway in front of many requests asks it. Its figures have wrk's shape (req/s, p50,
//! p99, requests, answers that are not OK), so a gRPC run sits in the rounds beside the
//! HTTP ones and is measured the same way (CPU per request of each process).
//!
//! A gRPC error status (`UNAUTHENTICATED`, ...) counts as not OK; a broken connection as a
//! socket error.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use prost::Message;

use crate::wrk::WrkFigures;

/// The method's path, as gRPC names it.
const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

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

impl StreamTally {
    fn add(&mut self, other: Self) {
        self.latencies_us.extend(other.latencies_us);
        self.not_ok += other.not_ok;
        self.errors += other.errors;
    }
}

/// Just the reply's `overall_code` (field 1): the rest of the message is skipped unread.
#[derive(Clone, PartialEq, Message)]
struct OverallCode {
    #[prost(int32, tag = "1")]
    code: i32,
}

/// One call as it goes on the wire, built once: the headers and the framed message. The
/// generator speaks HTTP/2 itself (the `h2` crate, as tonic does underneath) so that what
/// it spends per call is close to what wrk spends on an HTTP request: the server's share
/// of the two cores is then the same in both runs.
#[derive(Clone)]
struct Call {
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl Call {
    fn new(run: &GrpcRun) -> Result<Self> {
        let uri: Uri = format!("{}{PATH}", run.address.trim_end_matches('/'))
            .parse()
            .context("the gRPC address")?;
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        headers.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {}", run.api_key))
                .context("the API key as metadata")?,
        );
        let message = RateLimitRequest {
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
        // gRPC's framing: not compressed, the length, the message.
        let mut body = BytesMut::with_capacity(5 + message.encoded_len());
        body.put_u8(0);
        body.put_u32(u32::try_from(message.encoded_len())?);
        message.encode(&mut body)?;
        Ok(Self {
            uri,
            headers,
            body: body.freeze(),
        })
    }

    fn request(&self) -> Request<()> {
        let mut request = Request::new(());
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Runs the load; its figures. Fails only when no connection can be made.
///
/// Each connection is a thread of its own with a single-threaded runtime that drives it
/// and its share of the streams, as wrk gives each thread its connections: a call never
/// wakes another core.
pub async fn run(run: &GrpcRun) -> Result<WrkFigures> {
    let call = Call::new(run)?;
    let authority = call
        .uri
        .authority()
        .context("the gRPC address has no host:port")?
        .to_string();
    let connections = run.connections.max(1);
    let deadline = Instant::now() + run.duration;
    let started = Instant::now();
    let threads: Vec<_> = (0..connections)
        .map(|c| {
            // Streams spread over the connections as evenly as they go.
            let streams = run.streams / connections + usize::from(c < run.streams % connections);
            let (call, authority, address) = (call.clone(), authority.clone(), run.address.clone());
            std::thread::spawn(move || -> Result<StreamTally> {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(connection(call, authority, address, streams, deadline))
            })
        })
        .collect();
    let mut tally = StreamTally::default();
    for thread in threads {
        let one = thread
            .join()
            .map_err(|_| anyhow::anyhow!("a gRPC connection's thread panicked"))??;
        tally.add(one);
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(figures(tally, elapsed))
}

/// One HTTP/2 connection and its streams, until the deadline; what they saw together.
async fn connection(
    call: Call,
    authority: String,
    address: String,
    streams: usize,
    deadline: Instant,
) -> Result<StreamTally> {
    let tcp = tokio::net::TcpStream::connect(&authority)
        .await
        .with_context(|| format!("connecting to the gRPC service at {address}"))?;
    tcp.set_nodelay(true)?;
    let (sender, connection) = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 24)
        .handshake::<_, Bytes>(tcp)
        .await
        .context("the HTTP/2 handshake with the gRPC service")?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("bench: a gRPC connection ended: {e}");
        }
    });
    let tasks: Vec<_> = (0..streams)
        .map(|_| tokio::spawn(stream(sender.clone(), call.clone(), deadline)))
        .collect();
    let mut tally = StreamTally::default();
    for task in tasks {
        let one = task.await.context("a gRPC stream panicked")?;
        tally.add(one);
    }
    Ok(tally)
}

/// One stream: a call, its answer, the next call, until the deadline.
async fn stream(
    mut sender: h2::client::SendRequest<Bytes>,
    call: Call,
    deadline: Instant,
) -> StreamTally {
    let mut tally = StreamTally::default();
    while Instant::now() < deadline {
        let sent = Instant::now();
        let answer = one_call(&mut sender, &call).await;
        let took = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
        match answer {
            Ok(ok) => {
                tally.latencies_us.push(took);
                if !ok {
                    tally.not_ok += 1;
                }
            }
            Err(_) => tally.errors += 1,
        }
    }
    tally
}

/// One `ShouldRateLimit`: whether it was answered `OK` (an over-limit or an error status
/// is `false`); an error when the connection failed.
async fn one_call(sender: &mut h2::client::SendRequest<Bytes>, call: &Call) -> Result<bool> {
    let ready = sender.clone().ready().await?;
    *sender = ready;
    let (response, mut outgoing) = sender.send_request(call.request(), false)?;
    outgoing.send_data(call.body.clone(), true)?;
    let response = response.await?;
    let mut body = response.into_body();
    let mut message = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        message.extend_from_slice(&chunk);
    }
    let status = body
        .trailers()
        .await?
        .and_then(|t| t.get("grpc-status").cloned());
    if status.as_ref().map(HeaderValue::as_bytes) != Some(b"0") {
        return Ok(false);
    }
    if message.len() < 5 {
        bail!("a reply without its message");
    }
    let overall = OverallCode::decode(&message[5..])?;
    Ok(overall.code == Code::Ok as i32)
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
