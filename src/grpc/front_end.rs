//! The gRPC listener and its workers. Like the HTTP server's, each worker is a thread of
//! its own with a single-threaded runtime and its own [`RateLimiter`] (its acquirer: a
//! Redis connection, batcher and tally): one acceptor hands each new connection to the
//! next worker in turn, and a connection with all its streams stays on that thread. A
//! call then never crosses threads, so the HTTP/2 connection's state is never contended
//! and no stream wakes another core.
//!
//! Stopping: the acceptor stops taking connections, each worker answers the calls in
//! flight (tonic's graceful shutdown) and ends; the front end's task ends with the last.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::server::RateLimiter;

/// How long the acceptor waits after a failed accept before the next.
const ACCEPT_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

/// Makes a worker's [`RateLimiter`], on that worker's thread (its Redis connection is
/// then that thread's).
pub type MakeLimiter = Arc<dyn Fn() -> RateLimiter + Send + Sync>;

/// The gRPC listener, bound (so its port is known) but not yet serving.
pub struct GrpcFrontEnd {
    listener: tokio::net::TcpListener,
    address: SocketAddr,
}

impl GrpcFrontEnd {
    /// Binds `address`; port 0 picks a free port, which is logged.
    pub async fn bind(address: &str) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen for gRPC on {address}"))?;
        let address = listener.local_addr()?;
        tracing::info!(%address, "ratekeeper gRPC (Envoy rate limit service) listening");
        Ok(Self { listener, address })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Serves on `workers` threads, each with a limiter from `make`, until `stop` is
    /// cancelled; then stops accepting and finishes the calls in flight.
    pub fn serve(
        self,
        make: MakeLimiter,
        workers: usize,
        stop: CancellationToken,
    ) -> JoinHandle<anyhow::Result<()>> {
        let mut queues = Vec::with_capacity(workers.max(1));
        let mut threads = Vec::with_capacity(workers.max(1));
        for n in 0..workers.max(1) {
            let (queue, connections) = mpsc::unbounded_channel::<std::net::TcpStream>();
            let (make, stop) = (make.clone(), stop.clone());
            let thread = std::thread::Builder::new()
                .name(format!("grpc-worker-{n}"))
                .spawn(move || worker(connections, &make, &stop))
                .context("starting a gRPC worker thread");
            match thread {
                Ok(thread) => threads.push(thread),
                Err(e) => return tokio::spawn(async move { Err(e) }),
            }
            queues.push(queue);
        }
        tokio::spawn(async move {
            let accepted = accept(self.listener, &queues, &stop).await;
            // The workers end once their queues close and their calls are answered.
            drop(queues);
            let joined = tokio::task::spawn_blocking(move || {
                threads
                    .into_iter()
                    .map(|t| {
                        t.join()
                            .map_err(|_| anyhow::anyhow!("a gRPC worker panicked"))?
                    })
                    .collect::<anyhow::Result<Vec<()>>>()
            })
            .await
            .context("waiting for the gRPC workers")?;
            accepted.and(joined.map(|_| ()))
        })
    }
}

/// Hands each accepted connection to the next worker, until `stop`.
async fn accept(
    listener: tokio::net::TcpListener,
    queues: &[mpsc::UnboundedSender<std::net::TcpStream>],
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    let mut next = 0;
    loop {
        let (stream, _) = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // A connection that failed before it was accepted (reset, too many open
                // files): the listener itself is fine. A pause before the next, so that a
                // lasting cause (no file descriptor left) is not retried in a busy loop.
                Err(e) => {
                    tracing::warn!(error = %e, "a gRPC connection could not be accepted");
                    tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        () = tokio::time::sleep(ACCEPT_PAUSE) => {}
                    }
                    continue;
                }
            },
        };
        // Registered with the worker's runtime, not this one's.
        let stream = match stream.set_nodelay(true).and_then(|()| stream.into_std()) {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "a gRPC connection could not be handed over");
                continue;
            }
        };
        if queues[next % queues.len()].send(stream).is_err() {
            anyhow::bail!("a gRPC worker has stopped");
        }
        next += 1;
    }
}

/// One worker: a single-threaded runtime serving the connections it is handed.
fn worker(
    mut connections: mpsc::UnboundedReceiver<std::net::TcpStream>,
    make: &MakeLimiter,
    stop: &CancellationToken,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("a gRPC worker's runtime")?;
    runtime.block_on(async {
        let limiter = make();
        let incoming = async_stream_of(&mut connections);
        // One service, no router: every other path is answered UNIMPLEMENTED by it.
        tonic::transport::Server::builder()
            .serve_with_incoming_shutdown(
                RateLimitServiceServer::new(limiter),
                incoming,
                stop.clone().cancelled_owned(),
            )
            .await
            .context("the gRPC server failed")
    })
}

/// The handed connections as the stream tonic serves, each registered with this thread's
/// runtime; it ends when the acceptor drops the queue.
fn async_stream_of(
    connections: &mut mpsc::UnboundedReceiver<std::net::TcpStream>,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> + '_ {
    futures_util::stream::unfold(connections, |connections| async move {
        let stream = connections.recv().await?;
        let registered = stream
            .set_nonblocking(true)
            .and_then(|()| tokio::net::TcpStream::from_std(stream));
        Some((registered, connections))
    })
}
