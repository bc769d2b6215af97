//! Several acquires decided all or nothing (`POST /v1/acquire` with `all`, Envoy's
//! descriptors of one request): granted only when each is, and a call with any denial
//! consumes nothing from any bucket. A job of the batcher's queue, decided by
//! `lua/acquire_all.lua`, which takes every item in order and gives every grant back
//! before it returns when one is denied or refused.
//!
//! On a Redis Cluster one script may only touch the keys of one hash slot: the items are
//! grouped by slot, one call per group, sent together. When any group is denied, the
//! groups that were granted give their grants back (`lua/give_back.lua`, naming each
//! grant's instant and id). So a call never admits more than its items' limits allow;
//! between the grant and its give-back, for a moment, another caller may be denied what
//! the give-back then frees (under-admitting, never over-admitting). A give-back that
//! cannot reach Redis leaves its grants taken until they refill or expire.

use std::collections::HashMap;

use futures_util::future::join_all;
use redis::cluster_routing::Slot;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::client::{Limiter, LimiterError, scripts};
use crate::decide::batch::{ALGORITHM_RETRIES, Alone, Batcher, stopped};
use crate::decide::call::AcquireCall;
use crate::decide::decision::{AcquireOutcome, LeaseId, parse_reply};
use crate::decide::keyed::KeyedBucket;
use crate::decide::reply::{Code, REPLY_LEN};
use crate::domain::{Algorithm, AppSlug, CheckOrPermits, PolicyName};
use crate::policy_config::PolicyConfig;

/// Whose bucket one item of an all-or-nothing acquire draws on.
#[derive(Debug, Clone, Copy)]
pub enum AllTarget<'a> {
    /// A global policy, with the algorithm this instance believes it uses (a token bucket
    /// for one it does not know yet; Redis redirects).
    Global {
        name: &'a PolicyName,
        algorithm: Algorithm,
        /// The policy in this instance's snapshot (`None`: not there yet).
        config: Option<&'a PolicyConfig>,
    },
    /// A caller's bucket of a keyed policy.
    Keyed(KeyedBucket<'a>),
}

/// One item of an all-or-nothing acquire.
#[derive(Debug, Clone, Copy)]
pub struct AllAsk<'a> {
    pub target: AllTarget<'a>,
    pub ask: CheckOrPermits,
}

type Replies = Vec<[i64; REPLY_LEN]>;

/// Whether a reply lets its item through: granted, unenforced or a shadow denial.
fn lets_through(reply: &[i64; REPLY_LEN]) -> bool {
    matches!(
        Code::of(reply[0]),
        Some(Code::Granted | Code::Unenforced | Code::ShadowDenied)
    )
}

impl Batcher {
    /// Decides `items` for `app` all or nothing: each item's outcome, in order (the call
    /// is granted when every one lets its item through). A check is decided as one permit
    /// and takes nothing; when the call fails, nothing is taken and the remaining permits
    /// told are the buckets' as they are. A global policy that uses another algorithm in
    /// Redis is decided again, the whole call, with that one's script.
    pub async fn acquire_all(
        &self,
        items: &[AllAsk<'_>],
        app: &AppSlug,
    ) -> Result<Vec<AcquireOutcome>, LimiterError> {
        let mut algorithms: Vec<Algorithm> = items
            .iter()
            .map(|item| match item.target {
                AllTarget::Global { algorithm, .. } => algorithm,
                AllTarget::Keyed(bucket) => bucket.policy.algorithm,
            })
            .collect();
        for _ in 0..=ALGORITHM_RETRIES {
            let calls: Vec<AcquireCall> = items
                .iter()
                .zip(&algorithms)
                .map(|(item, &algorithm)| {
                    let permits = item.ask.decided_as().get();
                    match &item.target {
                        AllTarget::Global { name, config, .. } => AcquireCall::global(
                            &self.limiter,
                            name,
                            algorithm,
                            permits,
                            app,
                            *config,
                        ),
                        AllTarget::Keyed(bucket) => {
                            AcquireCall::keyed(&self.limiter, bucket, permits, app)
                        }
                    }
                })
                .collect();
            let takes: Vec<bool> = items.iter().map(|item| !item.ask.is_check()).collect();
            let leases: Vec<Option<LeaseId>> = calls.iter().map(|call| call.lease).collect();
            let (reply, answer) = oneshot::channel();
            self.queue_alone(Alone::All(calls, takes, reply))?;
            let replies = answer.await.map_err(|_| stopped())??;
            let mut moved = false;
            for (reply, algorithm) in replies.iter().zip(algorithms.iter_mut()) {
                if reply[0] == Code::WrongAlgorithm.number() {
                    *algorithm = Algorithm::from_index(reply[1])
                        .ok_or_else(|| LimiterError::Reply(format!("{reply:?}")))?;
                    moved = true;
                }
            }
            if moved {
                continue;
            }
            let kept = replies.iter().all(lets_through);
            return replies
                .iter()
                .zip(leases)
                .zip(items)
                .zip(&algorithms)
                .map(|(((reply, lease), item), &algorithm)| {
                    // A lease is held only by a grant that was kept.
                    let lease = lease.filter(|_| kept && !item.ask.is_check());
                    parse_reply(reply, lease, algorithm)
                })
                .collect();
        }
        Err(LimiterError::Reply(format!(
            "a policy changed its algorithm {ALGORITHM_RETRIES} times during one acquire"
        )))
    }
}

impl Limiter {
    /// Decides `calls` all or nothing (`takes[i]`: whether call `i` takes, else it is a
    /// check): one call of `lua/acquire_all.lua` per hash slot, sent together, and the
    /// grants of the slots that were granted given back when another slot's failed.
    pub(crate) async fn all_or_nothing(
        &self,
        calls: &[AcquireCall],
        takes: &[bool],
        deadline: Instant,
    ) -> Result<Replies, LimiterError> {
        let groups = slot_groups(calls, self.conn.is_cluster());
        if let [group] = groups.as_slice() {
            return Ok(self.all_call(calls, takes, group, deadline).await?.1);
        }
        let answers = join_all(
            groups
                .iter()
                .map(|group| self.all_call(calls, takes, group, deadline)),
        )
        .await;
        let mut replies = vec![[0; REPLY_LEN]; calls.len()];
        let mut failed = None;
        for (group, answer) in groups.iter().zip(&answers) {
            match answer {
                Ok((_, group_replies)) => {
                    for (&i, reply) in group.iter().zip(group_replies) {
                        replies[i] = *reply;
                    }
                }
                Err(e) => failed = Some(e.clone()),
            }
        }
        if failed.is_none() && replies.iter().all(lets_through) {
            return Ok(replies);
        }
        // Undo the grants of the groups that kept theirs (a failed group gave its own back).
        let undo: Vec<Vec<(usize, i64)>> = groups
            .iter()
            .zip(&answers)
            .filter_map(|(group, answer)| {
                let (at, group_replies) = answer.as_ref().ok()?;
                group_replies.iter().all(lets_through).then(|| {
                    group
                        .iter()
                        .zip(group_replies)
                        .filter(|&(&i, reply)| takes[i] && reply[0] == Code::Granted.number())
                        .map(|(&i, _)| (i, *at))
                        .collect()
                })
            })
            .filter(|undo: &Vec<(usize, i64)>| !undo.is_empty())
            .collect();
        let given = join_all(undo.iter().map(|entries| {
            let entries: Vec<(&AcquireCall, i64)> =
                entries.iter().map(|&(i, at)| (&calls[i], at)).collect();
            async move { self.give_back_call(&entries, deadline).await }
        }))
        .await;
        for (entries, after) in undo.iter().zip(given) {
            let after = after?;
            for (&(i, _), back) in entries.iter().zip(after) {
                // As the bucket is now: what it was before the call.
                replies[i][1] = back[1];
                replies[i][3] = back[3];
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(replies),
        }
    }

    /// One call of `lua/acquire_all.lua` for the calls of `group`: its clock reading and
    /// their replies.
    async fn all_call(
        &self,
        calls: &[AcquireCall],
        takes: &[bool],
        group: &[usize],
        deadline: Instant,
    ) -> Result<(i64, Replies), LimiterError> {
        let entries = group.iter().map(|&i| (&calls[i], i64::from(takes[i])));
        let cmd = AcquireCall::entries_cmd(&scripts::ACQUIRE_ALL, entries);
        let packed: Vec<u8> = self
            .run_script(&scripts::ACQUIRE_ALL, &cmd, deadline)
            .await?;
        let integers = scripts::batch_reply_integers(&packed)
            .filter(|integers| integers.len() == 1 + group.len() * REPLY_LEN)
            .ok_or_else(|| {
                LimiterError::Reply(format!(
                    "an all-or-nothing reply of {} bytes for {} acquires",
                    packed.len(),
                    group.len()
                ))
            })?;
        Ok((integers[0], replies_of(&integers[1..])))
    }

    /// One call of `lua/give_back.lua`: each entry an acquire whose permits go back, and
    /// the instant of its grant (0 for a refund: now, the newest grants).
    pub(crate) async fn give_back_call(
        &self,
        entries: &[(&AcquireCall, i64)],
        deadline: Instant,
    ) -> Result<Replies, LimiterError> {
        let cmd = AcquireCall::entries_cmd(&scripts::GIVE_BACK, entries.iter().copied());
        let flat: Vec<i64> = self.run_script(&scripts::GIVE_BACK, &cmd, deadline).await?;
        if flat.len() != entries.len() * REPLY_LEN {
            return Err(LimiterError::Reply(format!(
                "{} integers for {} give-backs",
                flat.len(),
                entries.len()
            )));
        }
        Ok(replies_of(&flat))
    }
}

/// The calls by hash slot, in order of first appearance (one group on a single node).
fn slot_groups(calls: &[AcquireCall], cluster: bool) -> Vec<Vec<usize>> {
    if !cluster {
        return vec![(0..calls.len()).collect()];
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: HashMap<Slot, usize> = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        let group = *group_of
            .entry(Slot::for_key(call.key()))
            .or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
        groups[group].push(i);
    }
    groups
}

fn replies_of(flat: &[i64]) -> Replies {
    flat.chunks_exact(REPLY_LEN)
        .map(|chunk| chunk.try_into().expect("REPLY_LEN integers"))
        .collect()
}
