//! Natural batching of acquires on one Redis connection: the token-bucket acquires (of
//! global policies, and of callers' buckets of keyed ones) that arrive while a call is in
//! flight wait for it, then go together as one EVALSHA of `lua/token_bucket_batch.lua`,
//! which decides them one after the other in arrival order, each as its single script
//! would (they share `lua/lib/`). No timer: at low load an acquire goes alone at once,
//! so its latency does not grow; under load a batch forms by itself, and Redis runs one
//! script call for many acquires instead of one each.
//!
//! A batch is one call to one node, so only a single Redis node batches: on a cluster the
//! policies of a batch would live in many slots, and each acquire goes alone as before.

use std::sync::OnceLock;

use tokio::sync::{mpsc, oneshot};

use crate::domain::{Algorithm, AppSlug, Permits, PolicyName};

use super::acquire::{AcquireOutcome, WRONG_ALGORITHM, parse_reply};
use super::keyed::in_mode;
use super::{KeyedBucket, Limiter, LimiterError, scripts};

/// The most acquires in one call; more waiting go in the next.
const MAX_BATCH: usize = 256;

/// The integers of one acquire's reply.
const REPLY_LEN: usize = 6;

type Reply = Result<[i64; REPLY_LEN], LimiterError>;

/// One acquire waiting for its turn.
struct Job {
    /// The policy's hash (global) or the caller's bucket (keyed).
    key: String,
    permits: i64,
    kind: Kind,
    reply: oneshot::Sender<Reply>,
}

/// Whose bucket, with what the script needs to decide on it.
enum Kind {
    /// A global policy: its config is in its hash; the app is checked there.
    Global { app: AppSlug },
    /// A caller's bucket of a keyed policy: its limits from this instance's snapshot.
    Keyed {
        max_permits: i64,
        rate: String,
        enabled: bool,
        version: i64,
    },
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

    /// Decides an acquire of a global token-bucket policy (or of a policy this instance
    /// does not know yet): in a batch with the acquires around it, or alone. A policy that
    /// uses another algorithm in Redis is decided by its own script right after.
    pub async fn acquire_token_bucket(
        &self,
        name: &PolicyName,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        if self.limiter.conn.is_cluster() {
            return self
                .limiter
                .acquire(name, Algorithm::TokenBucket, permits, app)
                .await;
        }
        let key = self.limiter.keys.policy(name);
        let kind = Kind::Global { app: app.clone() };
        let reply = self.decide(key, permits, kind).await?;
        match reply {
            [WRONG_ALGORITHM, index, ..] => {
                let actual = Algorithm::from_index(index)
                    .ok_or_else(|| LimiterError::Reply(format!("{reply:?}")))?;
                self.limiter.acquire(name, actual, permits, app).await
            }
            _ => parse_reply(&reply, None, Algorithm::TokenBucket),
        }
    }

    /// Decides an acquire on one caller's bucket of a keyed token-bucket policy, in a
    /// batch with the acquires around it, or alone (on a cluster, always alone: the
    /// buckets of a batch would be in many slots).
    pub async fn acquire_keyed_token_bucket(
        &self,
        bucket: &KeyedBucket<'_>,
        permits: Permits,
        app: &AppSlug,
    ) -> Result<AcquireOutcome, LimiterError> {
        if self.limiter.conn.is_cluster() {
            return self.limiter.acquire_keyed(bucket, permits, app).await;
        }
        let kind = Kind::Keyed {
            max_permits: bucket.limits.max_permits,
            rate: bucket.limits.param(Algorithm::TokenBucket),
            enabled: bucket.policy.enabled,
            version: bucket.policy.version,
        };
        let reply = self
            .decide(self.limiter.keyed_key(bucket), permits, kind)
            .await?;
        let outcome = parse_reply(&reply, None, Algorithm::TokenBucket)?;
        Ok(in_mode(outcome, bucket.policy.mode))
    }

    /// Queues one acquire (starting the sending task at the first) and waits for its reply.
    async fn decide(
        &self,
        key: String,
        permits: Permits,
        kind: Kind,
    ) -> Result<[i64; REPLY_LEN], LimiterError> {
        let queue = self.queue.get_or_init(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            tokio::spawn(send_batches(self.limiter.clone(), receiver));
            sender
        });
        let (reply, answer) = oneshot::channel();
        let job = Job {
            key,
            permits: permits.get(),
            kind,
            reply,
        };
        let stopped = || LimiterError::Reply("the acquire batcher stopped".to_owned());
        queue.send(job).map_err(|_| stopped())?;
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
        let replies = limiter.decide_token_buckets(&jobs).await;
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
    /// One call for `jobs`: the single script for one, the batch script for more.
    async fn decide_token_buckets(&self, jobs: &[Job]) -> Result<Vec<i64>, LimiterError> {
        let mut conn = self.conn.clone();
        let invocation = match jobs {
            [
                Job {
                    key,
                    permits,
                    kind: Kind::Global { app },
                    ..
                },
            ] => {
                let mut one = scripts::TOKEN_BUCKET.key(key);
                one.arg(permits).arg(app.as_str());
                one
            }
            _ => {
                let mut many = scripts::TOKEN_BUCKET_BATCH.prepare_invoke();
                for job in jobs {
                    many.key(&job.key);
                    match &job.kind {
                        Kind::Global { app } => many.arg("g").arg(job.permits).arg(app.as_str()),
                        Kind::Keyed {
                            max_permits,
                            rate,
                            enabled,
                            version,
                        } => many
                            .arg("k")
                            .arg(job.permits)
                            .arg(max_permits)
                            .arg(rate)
                            .arg(if *enabled { "1" } else { "0" })
                            .arg(version),
                    };
                }
                many
            }
        };
        self.timed(invocation.invoke_async(&mut conn)).await
    }
}
