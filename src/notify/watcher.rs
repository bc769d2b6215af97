//! Every instance's watcher: every couple of seconds it passes the denials its flusher
//! took (and, for webhooks that want it, how near their policies are to the limit) to the
//! episodes kept in Redis, and writes an event for each change Redis answers it, for the
//! webhook whose change it is. Redis answers each change to one caller, so however many
//! instances watch, an episode is reported once. Off the acquire path: it reads what the
//! flusher already took.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use ratekeeper_limiter::{
    Denied, EpisodeChange, Limiter, LiveView, Nearness, StateRead, Transition,
};

use crate::acquire::{FlushedDenials, unix_minute_now};
use crate::domain::{PolicyName, WebhookEvent, rfc3339};
use crate::snapshot::Snapshot;
use crate::store::{Store, WatchingWebhook, now_ms};

/// How often the watcher looks: as often as the flusher writes.
const LOOK_EVERY: Duration = Duration::from_secs(2);
/// The most members one call of the episodes script takes (some 2 to 3 µs of Redis each).
const MEMBERS_PER_CALL: usize = 200;

pub struct Watcher {
    store: Store,
    limiter: Limiter,
    snapshot: Arc<Snapshot>,
    denials: Arc<FlushedDenials>,
    /// The sender's, woken when an event was written.
    wake: Arc<Notify>,
    /// The webhooks as last read: what a look uses while the database is away.
    known: Mutex<Vec<WatchingWebhook>>,
    /// Events whose episode changed in Redis but which the database did not take yet:
    /// written at the next look that reaches it (Redis answers each change only once).
    unwritten: Mutex<Vec<Unwritten>>,
}

/// An event waiting to be written to the outbox.
#[derive(Debug, Clone)]
struct Unwritten {
    webhook_id: String,
    event: WebhookEvent,
    data: String,
    occurred_ms: i64,
}

/// Events held while the database is away, at most (beyond, the oldest are dropped,
/// logged).
const UNWRITTEN_HELD: usize = 10_000;

/// The member of an episode: one webhook's view of one policy.
fn member(webhook: &str, policy: &str) -> String {
    format!("{webhook} {policy}")
}

impl Watcher {
    pub fn new(
        store: Store,
        limiter: Limiter,
        snapshot: Arc<Snapshot>,
        denials: Arc<FlushedDenials>,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            store,
            limiter,
            snapshot,
            denials,
            wake,
            known: Mutex::default(),
            unwritten: Mutex::default(),
        }
    }

    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticker = tokio::time::interval(LOOK_EVERY);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            if let Err(e) = self.look().await {
                tracing::warn!(error = format!("{e:#}"), "webhook events not looked for");
            }
        }
    }

    /// One look: the denials taken, the episodes changed, the events written.
    pub async fn look(&self) -> anyhow::Result<()> {
        let denied = self.denials.take();
        let hooks = match self.read_webhooks().await {
            Ok(hooks) => {
                self.known.lock().expect("known lock").clone_from(&hooks);
                hooks
            }
            Err(e) => {
                // The episodes go on from the webhooks as last read; their events wait.
                tracing::warn!(error = %e, "webhooks not read; using those read before");
                self.known.lock().expect("known lock").clone()
            }
        };
        if hooks.is_empty() {
            // Nothing to watch; what earlier looks held is still written.
            return self.write(Vec::new()).await;
        }
        let owner = |policy: &str| {
            self.snapshot
                .policy(policy)
                .map(|p| p.owner_app.as_str().to_owned())
        };
        let mut denials: Vec<(String, i64)> = Vec::new();
        for policy in denied.keys() {
            let Some(app) = owner(policy) else { continue };
            for hook in hooks
                .iter()
                .filter(|h| h.app_slug == app && tracks_episodes(h))
            {
                denials.push((member(&hook.id, policy), hook.quiet_period_ms));
            }
        }
        let nearness = self.nearness(&hooks).await;
        let denials: Vec<Denied<'_>> = denials
            .iter()
            .map(|(member, quiet_ms)| Denied {
                member,
                quiet_ms: *quiet_ms,
            })
            .collect();
        let nearness: Vec<Nearness<'_>> = nearness
            .iter()
            .map(|(member, near)| Nearness {
                member,
                near: *near,
            })
            .collect();
        // In calls of at most MEMBERS_PER_CALL, so that no call holds Redis long; the
        // first call is made even with nothing to pass, for the episodes that ended.
        let mut changes = Vec::new();
        let (mut denials, mut nearness) = (&denials[..], &nearness[..]);
        let mut failed = None;
        loop {
            let (these, rest) = denials.split_at(denials.len().min(MEMBERS_PER_CALL));
            let room = MEMBERS_PER_CALL - these.len();
            let (near, near_rest) = nearness.split_at(nearness.len().min(room));
            match self.limiter.episodes(these, near).await {
                Ok(answered) => changes.extend(answered),
                Err(e) => {
                    // The denials not passed count at the next look (a policy's denials
                    // passed for one webhook and not another only extend its episode).
                    let unpassed: HashSet<&str> = denials
                        .iter()
                        .filter_map(|d| d.member.split_once(' ').map(|(_, policy)| policy))
                        .collect();
                    let back = denied
                        .iter()
                        .filter(|(policy, _)| unpassed.contains(policy.as_str()))
                        .map(|(policy, n)| (policy.clone(), *n))
                        .collect();
                    self.denials.put_back(back);
                    failed = Some(e);
                    break;
                }
            }
            (denials, nearness) = (rest, near_rest);
            if denials.is_empty() && nearness.is_empty() {
                break;
            }
        }
        let events = self.events(&hooks, &changes).await;
        let written = self.write(events).await;
        match failed {
            Some(e) => Err(anyhow::Error::new(e).context("episodes not all passed to Redis")),
            None => written,
        }
    }

    async fn read_webhooks(&self) -> anyhow::Result<Vec<WatchingWebhook>> {
        let mut tx = self.store.begin_read().await?;
        let hooks = tx.watching_webhooks().await?;
        tx.commit().await?;
        Ok(hooks)
    }

    /// Writes the events held from earlier looks and `events` in one transaction, and
    /// wakes the sender; if the database does not take them, they are held for the next
    /// look.
    async fn write(&self, events: Vec<Unwritten>) -> anyhow::Result<()> {
        let mut all = std::mem::take(&mut *self.unwritten.lock().expect("unwritten lock"));
        all.extend(events);
        if all.is_empty() {
            return Ok(());
        }
        match self.write_all(&all).await {
            Ok(()) => {
                self.wake.notify_one();
                Ok(())
            }
            Err(e) => {
                let held = all.len();
                if held > UNWRITTEN_HELD {
                    tracing::warn!(
                        dropped = held - UNWRITTEN_HELD,
                        "webhook events dropped: too many held"
                    );
                    all.drain(..held - UNWRITTEN_HELD);
                }
                let mut unwritten = self.unwritten.lock().expect("unwritten lock");
                all.append(&mut unwritten);
                *unwritten = all;
                Err(e.context(format!(
                    "{} webhook events held for the next look",
                    unwritten.len()
                )))
            }
        }
    }

    async fn write_all(&self, events: &[Unwritten]) -> anyhow::Result<()> {
        let mut tx = self.store.begin().await?;
        for e in events {
            tx.enqueue_delivery(&e.webhook_id, e.event.as_str(), &e.data, e.occurred_ms)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// For each webhook that wants `policy.near_limit`, each global policy of its
    /// application and whether it is below the webhook's threshold now (one Redis call).
    async fn nearness(&self, hooks: &[WatchingWebhook]) -> Vec<(String, bool)> {
        let wanting: Vec<&WatchingWebhook> = hooks
            .iter()
            .filter(|h| wants(h, WebhookEvent::NearLimit))
            .collect();
        if wanting.is_empty() {
            return Vec::new();
        }
        let apps: Vec<&str> = wanting.iter().map(|h| h.app_slug.as_str()).collect();
        let policies: Vec<_> = self
            .snapshot
            .policies_owned_by(&apps)
            .into_iter()
            .filter(|p| !p.scope().is_keyed())
            .collect();
        let names: Vec<(PolicyName, StateRead)> = policies
            .iter()
            .map(|p| (p.config.name.clone(), StateRead::FromHash))
            .collect();
        let views = match self.limiter.live_views(&names, unix_minute_now(), 1).await {
            Ok(views) => views,
            Err(e) => {
                tracing::warn!(error = %e, "how near policies are to their limit not read");
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (policy, view) in policies.iter().zip(views) {
            let Some(state) = view.ok().and_then(|v| v.state) else {
                continue;
            };
            let left = state.current_permits / state.max_permits.max(1) as f64;
            for hook in wanting
                .iter()
                .filter(|h| h.app_slug == policy.owner_app.as_str())
            {
                let name = policy.config.name.as_str();
                out.push((member(&hook.id, name), left < hook.near_limit_below));
            }
        }
        out
    }

    /// An event per change, for its webhook if it still wants it, with the counts of the
    /// policy's last two minutes.
    async fn events(&self, hooks: &[WatchingWebhook], changes: &[EpisodeChange]) -> Vec<Unwritten> {
        let by_id: HashMap<&str, &WatchingWebhook> =
            hooks.iter().map(|h| (h.id.as_str(), h)).collect();
        let mut events = Vec::new();
        for change in changes {
            let Some((hook_id, policy)) = change.member.split_once(' ') else {
                continue;
            };
            let event = match change.transition {
                Transition::Denying => WebhookEvent::Denying,
                Transition::Recovered => WebhookEvent::Recovered,
                Transition::NearLimit => WebhookEvent::NearLimit,
            };
            match by_id.get(hook_id) {
                Some(hook) if wants(hook, event) => events.push((*hook, policy, event, change)),
                _ => {}
            }
        }
        if events.is_empty() {
            return Vec::new();
        }
        let policies: Vec<&str> = events
            .iter()
            .map(|(_, p, _, _)| *p)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let live = self.live(&policies).await;
        let now = now_ms();
        let mut out = Vec::with_capacity(events.len());
        for (hook, policy, event, change) in events {
            let mut data = json!({
                "application": hook.app_slug,
                "policy": policy,
                "since": rfc3339(change.since_ms),
            });
            if let Some(view) = live.get(policy) {
                let minute = |i: usize| {
                    view.minutes.get(i).map(|m| {
                        json!({"start": rfc3339(m.minute * 60_000), "granted": m.granted, "denied": m.denied})
                    })
                };
                // Oldest first: the minute before, then this one so far.
                data["previous_minute"] = minute(0).unwrap_or_default();
                data["last_minute"] = minute(1).unwrap_or_default();
                if let Some(state) = &view.state {
                    data["remaining"] = json!(state.current_permits);
                    data["capacity"] = json!(state.max_permits);
                }
            }
            out.push(Unwritten {
                webhook_id: hook.id.clone(),
                event,
                data: data.to_string(),
                occurred_ms: now,
            });
        }
        out
    }

    /// The policies' live views (the counts of the last two minutes, the state of a
    /// global one); a policy Redis could not answer for is left out.
    async fn live(&self, policies: &[&str]) -> HashMap<String, LiveView> {
        let names: Vec<(PolicyName, StateRead)> = policies
            .iter()
            .filter_map(|p| {
                let entry = self.snapshot.policy(p)?;
                let read = match entry.scope().is_keyed() {
                    true => StateRead::Skip,
                    false => StateRead::FromHash,
                };
                Some((entry.config.name.clone(), read))
            })
            .collect();
        match self.limiter.live_views(&names, unix_minute_now(), 2).await {
            Ok(views) => names
                .iter()
                .zip(views)
                .filter_map(|((name, _), view)| Some((name.as_str().to_owned(), view.ok()?)))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "counts for webhook events not read");
                HashMap::new()
            }
        }
    }
}

fn wants(hook: &WatchingWebhook, event: WebhookEvent) -> bool {
    event.in_list(&hook.events)
}

/// Whether the webhook needs the policy's episodes followed: it wants their start or end.
fn tracks_episodes(hook: &WatchingWebhook) -> bool {
    wants(hook, WebhookEvent::Denying) || wants(hook, WebhookEvent::Recovered)
}
