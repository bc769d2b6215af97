//! The calls the batcher makes for what waited together: the acquires of a batch in as
//! few script calls as the connection allows (one on a single node, one per slot on a
//! cluster, sent together), and the restore of a lost policy, and what goes alone.

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use redis::Cmd;
use redis::cluster_routing::Slot;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::client::scripts::LuaScript;
use crate::client::{Limiter, LimiterError, functions, scripts};
use crate::decide::batch::{Alone, Reply};
use crate::decide::batch_figures::BatchFigures;
use crate::decide::batch_plan::{Entry, Plan};
use crate::decide::call::AcquireCall;
use crate::decide::reply::REPLY_LEN;
use crate::policy_config::PolicyConfig;

impl Limiter {
    /// Does work that goes alone and answers its waiter.
    pub(crate) async fn run_queued_alone(&self, work: Alone, deadline: Instant) {
        match work {
            Alone::Restore(config, reply) => {
                let _ = reply.send(self.restore_policy(&config, deadline).await);
            }
            Alone::All(calls, takes, reply) => {
                let _ = reply.send(self.all_or_nothing(&calls, &takes, deadline).await);
            }
            Alone::GiveBack(call, reply) => {
                let given = self.give_back_call(&[(&call, 0)], deadline).await;
                let _ = reply.send(given.map(|replies| replies[0]));
            }
        }
    }

    /// Writes a lost policy's configuration back (its sync script, loaded first if Redis
    /// has lost that too), within `deadline`.
    pub(crate) async fn restore_policy(
        &self,
        config: &PolicyConfig,
        deadline: Instant,
    ) -> Result<(), LimiterError> {
        let mut conn = self.conn.clone();
        let left = deadline.saturating_duration_since(Instant::now());
        let invocation = self.sync_invocation(config);
        self.timed_for(left, invocation.invoke_async::<i64>(&mut conn))
            .await
            .map(|_| ())
    }

    /// Decides `calls` (in arrival order) in as few script calls as the connection allows
    /// (one on a single node; one per slot on a cluster, sent together), and answers each
    /// acquire's waiter as soon as its call is back.
    pub(crate) async fn decide_all(
        &self,
        calls: &[AcquireCall],
        waiting: &mut [Option<oneshot::Sender<Reply>>],
        deadline: Instant,
        figures: &BatchFigures,
    ) {
        let cluster = self.conn.is_cluster();
        let plan = Plan::of(
            calls.len(),
            |i| calls[i].key(),
            // On a single node every acquire goes in the one call.
            |i| cluster.then(|| Slot::for_key(calls[i].key())),
            |i, j| calls[i].repeated_by(&calls[j]),
        );
        let sent = |i: usize| {
            let entries = &plan.calls[i];
            let expected = plan.replies_of(i) * REPLY_LEN;
            figures.size.observe(plan.replies_of(i) as f64);
            async move {
                let timer = figures.call_seconds.start_timer();
                let flat = self.decide_entries(calls, entries, deadline).await;
                timer.observe_duration();
                let flat = flat.and_then(|flat| {
                    if flat.len() == expected {
                        Ok(flat)
                    } else {
                        Err(LimiterError::Reply(format!(
                            "{} integers for {} acquires",
                            flat.len(),
                            expected / REPLY_LEN
                        )))
                    }
                });
                (i, flat)
            }
        };
        if let [_] = plan.calls.as_slice() {
            let (_, replies) = sent(0).await;
            answer(&plan, 0..calls.len(), &replies, waiting);
            return;
        }
        let mut acquires_of: Vec<Vec<usize>> = vec![Vec::new(); plan.calls.len()];
        for (acquire, &(call, _)) in plan.replies.iter().enumerate() {
            acquires_of[call].push(acquire);
        }
        let mut calls_back: FuturesUnordered<_> = (0..plan.calls.len()).map(sent).collect();
        while let Some((call, replies)) = calls_back.next().await {
            answer(&plan, acquires_of[call].iter().copied(), &replies, waiting);
        }
    }

    /// One script call for `entries`: an acquire's own script when it is alone, else the
    /// batch script.
    async fn decide_entries(
        &self,
        calls: &[AcquireCall],
        entries: &[Entry],
        deadline: Instant,
    ) -> Result<Vec<i64>, LimiterError> {
        if let [Entry { first, count: 1 }] = entries {
            let call = &calls[*first];
            return self
                .run_script(call.script(), &call.alone_cmd(), deadline)
                .await;
        }
        let cmd = AcquireCall::batch_cmd(entries.iter().map(|e| (&calls[e.first], e.count)));
        let packed: Vec<u8> = self
            .run_script(&scripts::ACQUIRE_BATCH, &cmd, deadline)
            .await?;
        scripts::batch_reply_integers(&packed).ok_or_else(|| {
            LimiterError::Reply(format!(
                "a batch reply of {} bytes, not whole integers",
                packed.len()
            ))
        })
    }

    /// Runs a script call made by [`AcquireCall`], loading the script (or the library of
    /// functions) first when Redis does not have it (a restart, a `SCRIPT FLUSH`, a
    /// `FUNCTION FLUSH`), as `redis::ScriptInvocation` does.
    pub(crate) async fn run_script<T: redis::FromRedisValue>(
        &self,
        script: &LuaScript,
        cmd: &Cmd,
        deadline: Instant,
    ) -> Result<T, LimiterError> {
        let mut conn = self.conn.clone();
        let left = deadline.saturating_duration_since(Instant::now());
        let answered = self
            .timed_for(left, async {
                match cmd.query_async(&mut conn).await {
                    Err(e)
                        if e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                    {
                        script.load_async(&mut conn).await?;
                        cmd.query_async(&mut conn).await
                    }
                    Err(e) if functions::is_function_missing(&e) => {
                        functions::LIBRARY
                            .load_cmd()
                            .query_async::<()>(&mut conn)
                            .await?;
                        cmd.query_async(&mut conn).await
                    }
                    answered => answered,
                }
            })
            .await;
        match answered {
            Err(LimiterError::Redis(e)) if functions::is_without_functions(&e) => {
                Err(LimiterError::Reply(format!(
                    "Redis at {} has no functions (FCALL): ratekeeper needs Redis 7.0 or later",
                    self.address()
                )))
            }
            answered => answered,
        }
    }
}

/// Answers the waiters of `acquires` from the replies of their call (the plan says where
/// each one's is).
fn answer(
    plan: &Plan,
    acquires: impl Iterator<Item = usize>,
    replies: &Result<Vec<i64>, LimiterError>,
    waiting: &mut [Option<oneshot::Sender<Reply>>],
) {
    for acquire in acquires {
        let at = plan.replies[acquire].1;
        let reply = match replies {
            Ok(flat) => Ok(flat[at * REPLY_LEN..(at + 1) * REPLY_LEN]
                .try_into()
                .expect("REPLY_LEN integers")),
            Err(e) => Err(e.clone()),
        };
        if let Some(waiter) = waiting[acquire].take() {
            // A request that gave up waiting has dropped its receiver: nothing to do.
            let _ = waiter.send(reply);
        }
    }
}
