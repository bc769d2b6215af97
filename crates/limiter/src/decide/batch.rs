//! Natural batching of acquires on one Redis connection: the acquires (of global policies,
//! and of callers' buckets of keyed ones, whatever their algorithm) that arrive while a
//! call is in flight wait for it, then go together as one EVALSHA of
//! `lua/acquire_batch.lua`, which decides them one after the other in arrival order, each
//! as its single script would (they call the same functions of `lua/lib/`). No timer: at
//! low load an acquire goes alone, as its own script, after one poll of the worker's
//! sockets, so its latency does not grow; under load a batch forms by itself, and Redis
//! runs one script call for many acquires instead of one each. Before it forms a batch the
//! batcher lets its worker read the requests already there (`let_the_worker_read_first`),
//! so that a batch holds what came with it, not only what came during the last call.
//!
//! Identical acquires of one bucket (the same permits, app and limits) go as one entry
//! with a count: a hot policy's batch sends its bucket's key and arguments once, and the
//! script decides each acquire in turn without reading them again. On a Redis Cluster a
//! script may only touch the keys of one hash slot, so a batch is one call per slot, the
//! calls sent together (see `batch_plan.rs`).

use std::sync::OnceLock;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::client::{Limiter, LimiterError};
use crate::decide::batch_figures::BatchFigures;
use crate::decide::call::AcquireCall;
use crate::decide::decision::{AcquireOutcome, parse_reply};
use crate::decide::keyed::KeyedBucket;
use crate::decide::reply::{Code, REPLY_LEN};
use crate::domain::{Algorithm, AppSlug, Permits, PolicyName};
use crate::policy_config::PolicyConfig;

/// The most acquires in one call; more waiting go in the next.
const MAX_BATCH: usize = 256;

/// How many times an acquire follows Redis' word that its policy uses another algorithm
/// (it changed, and this instance has not heard yet): twice only if it changed again
/// between the two calls.
pub(crate) const ALGORITHM_RETRIES: usize = 2;

pub(crate) type Reply = Result<[i64; REPLY_LEN], LimiterError>;

/// One piece of work waiting for its turn, and when its wait for Redis ends: one timeout
/// after it came.
struct Job {
    work: Work,
    deadline: Instant,
}

enum Work {
    Acquire(AcquireCall, oneshot::Sender<Reply>),
    /// Work that goes alone, in its turn: after the acquires queued before it, before
    /// those queued after it.
    Alone(Alone),
}

/// What goes to Redis as a call of its own rather than in a batch.
pub(crate) enum Alone {
    /// A policy Redis lost, put back from this instance's snapshot before the acquires
    /// queued after it are decided.
    Restore(PolicyConfig, oneshot::Sender<Result<(), LimiterError>>),
    /// An all-or-nothing acquire: its acquires, and for each whether it takes (else it is
    /// a check); answered with each one's reply (`decide/all.rs`).
    All(Vec<AcquireCall>, Vec<bool>, oneshot::Sender<AllReplies>),
    /// A refund: what an acquire with these arguments would take, given back.
    GiveBack(AcquireCall, oneshot::Sender<Reply>),
}

pub(crate) type AllReplies = Result<Vec<[i64; REPLY_LEN]>, LimiterError>;

/// The batching in front of one worker's connection. Its sender starts a task on the
/// first acquire (on the runtime of the worker that makes it), which sends the calls one
/// at a time and ends when the batcher is dropped.
pub struct Batcher {
    pub(crate) limiter: Limiter,
    figures: BatchFigures,
    queue: OnceLock<mpsc::UnboundedSender<Job>>,
}

impl Batcher {
    /// A batcher whose figures are kept but not exported.
    pub fn new(limiter: Limiter) -> Self {
        Self::with_figures(limiter, BatchFigures::unregistered())
    }

    /// A batcher that counts into `figures` (shared by every worker's batcher).
    pub fn with_figures(limiter: Limiter, figures: BatchFigures) -> Self {
        Self {
            limiter,
            figures,
            queue: OnceLock::new(),
        }
    }

    /// Decides an acquire of a global policy with the script of `algorithm` (what this
    /// instance believes it uses; a token bucket for a policy it does not know yet), with
    /// the policy's `config` in this instance's snapshot (`None`: not there yet): in a
    /// batch with the acquires around it, or alone. A policy that uses another algorithm in
    /// Redis is decided again with that one's script, in the next call.
    pub async fn acquire(
        &self,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: Permits,
        app: &AppSlug,
        config: Option<&PolicyConfig>,
    ) -> Result<AcquireOutcome, LimiterError> {
        let mut algorithm = algorithm;
        for _ in 0..=ALGORITHM_RETRIES {
            let call =
                AcquireCall::global(&self.limiter, name, algorithm, permits.get(), app, config);
            let lease = call.lease;
            let reply = self.decide(call).await?;
            match reply {
                [code, index, ..] if code == Code::WrongAlgorithm.number() => {
                    algorithm = Algorithm::from_index(index)
                        .ok_or_else(|| LimiterError::Reply(format!("{reply:?}")))?;
                }
                _ => return parse_reply(&reply, lease, algorithm),
            }
        }
        Err(LimiterError::Reply(format!(
            "policy {name} changed its algorithm {ALGORITHM_RETRIES} times during one acquire"
        )))
    }

    /// Decides an acquire on one caller's bucket of a keyed policy, in a batch with the
    /// acquires around it, or alone.
    pub async fn acquire_keyed(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        let call = AcquireCall::keyed(&self.limiter, bucket, permits.get(), app);
        let (lease, algorithm) = (call.lease, call.algorithm());
        let reply = self.decide(call).await?;
        parse_reply(&reply, lease, algorithm)
    }

    /// Puts a policy that Redis lost (a flush, a restart without persistence, an evicted
    /// or deleted key) back from `config`, ahead of every acquire queued after this call.
    pub async fn restore(&self, config: &PolicyConfig) -> Result<(), LimiterError> {
        let (reply, answer) = oneshot::channel();
        self.queue_alone(Alone::Restore(config.clone(), reply))?;
        answer.await.map_err(|_| stopped())?
    }

    /// Queues one acquire and waits for its reply, which comes at the latest one timeout
    /// after it came (see [`send_batches`]).
    async fn decide(&self, call: AcquireCall) -> Result<[i64; REPLY_LEN], LimiterError> {
        let (reply, answer) = oneshot::channel();
        self.queue(Work::Acquire(call, reply))?;
        answer.await.map_err(|_| stopped())?
    }

    /// Queues work that goes alone, in its turn.
    pub(crate) fn queue_alone(&self, alone: Alone) -> Result<(), LimiterError> {
        self.queue(Work::Alone(alone))
    }

    /// Queues work, starting the sending task at the first.
    fn queue(&self, work: Work) -> Result<(), LimiterError> {
        let deadline = Instant::now() + self.limiter.timeout;
        let queue = self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(send_batches(
                self.limiter.clone(),
                self.figures.clone(),
                receiver,
            ));
            sender
        });
        queue.send(Job { work, deadline }).map_err(|_| stopped())
    }
}

pub(crate) fn stopped() -> LimiterError {
    LimiterError::Reply("the acquire batcher stopped".to_owned())
}

/// Takes what is waiting (at most [`MAX_BATCH`]), sends it, answers each acquire, and
/// again, until every sender is gone.
///
/// A call waits for Redis until the earliest deadline of the acquires in it, so every
/// acquire is answered by its own deadline: the acquires queued behind a call to a Redis
/// that does not answer wait for that call (which ends before their deadlines, its
/// acquires having come first), then for their own call, which ends by their earliest
/// deadline; one whose deadline passed meanwhile is answered at once, not sent. One timer
/// a call, not one an acquire.
async fn send_batches(
    limiter: Limiter,
    figures: BatchFigures,
    mut queue: mpsc::UnboundedReceiver<Job>,
) {
    let mut calls: Vec<AcquireCall> = Vec::with_capacity(MAX_BATCH);
    let mut waiting: Vec<Option<oneshot::Sender<Reply>>> = Vec::with_capacity(MAX_BATCH);
    let mut next = None;
    // What this batcher last added to the shared gauge: the queue is measured once a
    // batch, not counted up and down by every acquire (a shared counter each worker's
    // acquires would write).
    let mut reported = 0;
    loop {
        let first = match next.take() {
            Some(job) => job,
            None => match queue.recv().await {
                Some(job) => job,
                None => {
                    figures.queued.sub(reported);
                    return;
                }
            },
        };
        let_the_worker_read_first().await;
        let now = Instant::now();
        let mut earliest = None;
        let mut alone = None;
        let mut job = Some(first);
        while let Some(Job { work, deadline }) = job.take() {
            match work {
                // Decided after the acquires that came before it, before those after it.
                Work::Alone(work) => {
                    alone = Some((work, deadline));
                    break;
                }
                // Its request is gone (the client hung up): nothing to decide.
                Work::Acquire(_, reply) if reply.is_closed() => {}
                Work::Acquire(_, reply) if deadline <= now => {
                    let _ = reply.send(Err(LimiterError::Timeout(limiter.timeout)));
                }
                Work::Acquire(call, reply) => {
                    earliest = Some(earliest.map_or(deadline, |e: Instant| e.min(deadline)));
                    calls.push(call);
                    waiting.push(Some(reply));
                }
            }
            if calls.len() < MAX_BATCH {
                job = queue.try_recv().ok();
            }
        }
        let left = queue.len() as i64;
        figures.queued.add(left - reported);
        reported = left;
        if let Some(deadline) = earliest {
            limiter
                .decide_all(&calls, &mut waiting, deadline, &figures)
                .await;
            calls.clear();
            waiting.clear();
        }
        if let Some((work, deadline)) = alone {
            limiter.run_queued_alone(work, deadline).await;
        }
        next = queue.try_recv().ok();
    }
}

/// Gives the worker's runtime its turn before a batch is formed: the requests already
/// read or waiting at its sockets are parsed and queue their acquires, and the batch takes
/// them too, instead of leaving them for the call after. Redis then runs fewer, larger
/// calls, and each call costs Redis a fixed part (reading it, starting the script,
/// writing the reply, waking up) beside its acquires'. A yielded task runs again once the
/// runtime has polled its sockets (tokio defers it until then), so no timer is involved:
/// an acquire that comes alone waits one poll of the sockets, and one that comes under load
/// waits for the requests that came with it. Yielding again while the queue still grew
/// made no difference that the bench could see (bench/README.md).
async fn let_the_worker_read_first() {
    tokio::task::yield_now().await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::net::TcpListener;
    use tokio::time::Instant;

    use super::*;

    /// Acquires queued behind a call to a Redis that never answers (a stalled one) each
    /// give up one timeout after they came, not after the call ahead of them timed out and
    /// then their own. On tokio's paused clock: the times compared are the runtime's own,
    /// exact whatever the machine is doing.
    #[tokio::test(start_paused = true)]
    async fn an_acquire_waits_at_most_one_timeout_behind_a_stalled_call() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        // Accepts connections and keeps them open, answering nothing.
        tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        let timeout = Duration::from_millis(100);
        let batcher = Batcher::new(Limiter::new(&url, "test", timeout).unwrap());
        let (name, app) = (
            PolicyName::parse("p").unwrap(),
            AppSlug::parse("shop").unwrap(),
        );
        let permits = Permits::parse(1).unwrap();
        let one = |delay: Duration| {
            let (batcher, name, app) = (&batcher, &name, &app);
            async move {
                tokio::time::sleep(delay).await;
                let came = Instant::now();
                let answer = batcher
                    .acquire(name, Algorithm::TokenBucket, permits, app, None)
                    .await;
                (came, Instant::now(), answer)
            }
        };
        // The first goes alone; the others come while it is in flight.
        let delays = [0, 10, 20, 30, 40, 50, 60, 70].map(Duration::from_millis);
        let answers = futures_util::future::join_all(delays.map(one)).await;
        for (came, answered, answer) in answers {
            assert!(
                matches!(answer, Err(LimiterError::Timeout(_))),
                "{answer:?}"
            );
            assert!(answered - came <= timeout, "waited {:?}", answered - came);
        }
    }
}
