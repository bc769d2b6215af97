//! Natural batching of acquires on one Redis connection: the acquires (of global policies,
//! and of callers' buckets of keyed ones, whatever their algorithm) that arrive while a
//! call is in flight wait for it, then go together as one EVALSHA of
//! `lua/acquire_batch.lua`, which decides them one after the other in arrival order, each
//! as its single script would (they call the same functions of `lua/lib/`). No timer: at
//! low load an acquire goes alone at once, as its own script, so its latency does not
//! grow; under load a batch forms by itself, and Redis runs one script call for many
//! acquires instead of one each.
//!
//! A batch is one call to one node, so only a single Redis node batches: on a cluster the
//! policies of a batch would live in many slots, and each acquire goes alone as before.

use std::sync::OnceLock;

use tokio::sync::{mpsc, oneshot};

use crate::domain::{Algorithm, AppSlug, Permits, PolicyName};

use super::acquire::{AcquireOutcome, WRONG_ALGORITHM, parse_reply};
use super::call::AcquireCall;
use super::keyed::in_mode;
use super::{KeyedBucket, Limiter, LimiterError, scripts};

/// The most acquires in one call; more waiting go in the next.
const MAX_BATCH: usize = 256;

/// The integers of one acquire's reply.
const REPLY_LEN: usize = 6;

type Reply = Result<[i64; REPLY_LEN], LimiterError>;

/// One acquire waiting for its turn.
struct Job {
    call: AcquireCall,
    reply: oneshot::Sender<Reply>,
}

/// The batching in front of one worker's connection. Its sender starts a task on the
/// first acquire (on the runtime of the worker that makes it), which sends the calls one
/// at a time and ends when the batcher is dropped.
pub struct Batcher {
    limiter: Limiter,
    queue: OnceLock<mpsc::UnboundedSender<Job>>,
}

impl Batcher {
    pub fn new(limiter: Limiter) -> Self {
        Self {
            limiter,
            queue: OnceLock::new(),
        }
    }

    /// Decides an acquire of a global policy with the script of `algorithm` (what this
    /// instance believes it uses; a token bucket for a policy it does not know yet): in a
    /// batch with the acquires around it, or alone. A policy that uses another algorithm in
    /// Redis is decided by its own script right after.
    pub async fn acquire(
        &self,
        name: &PolicyName,
        algorithm: Algorithm,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        if self.limiter.conn.is_cluster() {
            return self.limiter.acquire(name, algorithm, permits, app).await;
        }
        let call = AcquireCall::global(&self.limiter, name, algorithm, permits.get(), app);
        let lease = call.lease;
        let reply = self.decide(call).await?;
        match reply {
            [WRONG_ALGORITHM, index, ..] => {
                let actual = Algorithm::from_index(index)
                    .ok_or_else(|| LimiterError::Reply(format!("{reply:?}")))?;
                self.limiter.acquire(name, actual, permits, app).await
            }
            _ => parse_reply(&reply, lease, algorithm),
        }
    }

    /// Decides an acquire on one caller's bucket of a keyed policy, in a batch with the
    /// acquires around it, or alone (on a cluster, always alone: the buckets of a batch
    /// would be in many slots).
    pub async fn acquire_keyed(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        if self.limiter.conn.is_cluster() {
            return self.limiter.acquire_keyed(bucket, permits, app).await;
        }
        let call = AcquireCall::keyed(
            &self.limiter,
            bucket,
            permits.get(),
            bucket.policy.enabled,
            app,
        );
        let (lease, algorithm) = (call.lease, call.algorithm());
        let reply = self.decide(call).await?;
        let outcome = parse_reply(&reply, lease, algorithm)?;
        Ok(in_mode(outcome, bucket.policy.mode))
    }

    /// Queues one acquire (starting the sending task at the first) and waits for its reply.
    async fn decide(&self, call: AcquireCall) -> Result<[i64; REPLY_LEN], LimiterError> {
        let queue = self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(send_batches(self.limiter.clone(), receiver));
            sender
        });
        let (reply, answer) = oneshot::channel();
        let stopped = || LimiterError::Reply("the acquire batcher stopped".to_owned());
        queue.send(Job { call, reply }).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// Takes what is waiting (at most [`MAX_BATCH`]), sends it as one call, answers each
/// acquire, and again, until every sender is gone.
async fn send_batches(limiter: Limiter, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut jobs: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = queue.recv().await {
        jobs.push(first);
        while jobs.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let replies = limiter.decide_batch(&jobs).await;
        let replies = replies.and_then(|flat| {
            if flat.len() == jobs.len() * REPLY_LEN {
                Ok(flat)
            } else {
                Err(LimiterError::Reply(format!(
                    "{} integers for {} acquires",
                    flat.len(),
                    jobs.len()
                )))
            }
        });
        match replies {
            Ok(flat) => {
                for (job, reply) in jobs.drain(..).zip(flat.chunks_exact(REPLY_LEN)) {
                    let reply: [i64; REPLY_LEN] = reply.try_into().expect("chunks of 6");
                    // A request that gave up waiting has dropped its receiver: nothing to do.
                    let _ = job.reply.send(Ok(reply));
                }
            }
            Err(e) => {
                for job in jobs.drain(..) {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

impl Limiter {
    /// One call for `jobs`: an acquire's own script for one, the batch script for more.
    async fn decide_batch(&self, jobs: &[Job]) -> Result<Vec<i64>, LimiterError> {
        let mut conn = self.conn.clone();
        let invocation = match jobs {
            [one] => one.call.alone(),
            _ => {
                let mut many = scripts::ACQUIRE_BATCH.prepare_invoke();
                for job in jobs {
                    job.call.add_to_batch(&mut many);
                }
                many
            }
        };
        self.timed(invocation.invoke_async(&mut conn)).await
    }
}
