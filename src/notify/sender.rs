//! Every instance's sender: it claims due deliveries one by one (a conditional UPDATE, so
//! one instance makes each attempt), sends each in a task of its own with a bounded
//! number in flight and a timeout, records the attempt, and schedules the next with an
//! exponential backoff for up to a day. A receiver that hangs or fails holds one of the
//! sender's slots until its timeout, and nothing else: the acquire path never waits on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use url::Url;

use crate::store::{AttemptRecord, DueDelivery, Store, now_ms};

use super::payload::{Event, render};
use super::receiver::{ReceiverRefused, parse_receiver, receiver_addresses};
use super::signature::WebhookSecret;

/// How often the sender looks for due deliveries when nothing wakes it.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// Deliveries in flight at once per instance.
const IN_FLIGHT: usize = 8;
/// Deliveries in flight at once per instance to one webhook: a receiver that hangs holds
/// at most these of the instance's slots, and the other webhooks' events still go.
const IN_FLIGHT_PER_WEBHOOK: usize = 2;
/// How long a receiver has to answer (its name's lookup included).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// A claimed delivery another instance may take over if this one has not recorded the
/// attempt by then (it stopped meanwhile): well past the send's timeout.
const CLAIM_MS: i64 = 60_000;
/// The first retry's delay; each after it doubles, up to [`LONGEST_DELAY_MS`].
const FIRST_DELAY_MS: i64 = 2_000;
const LONGEST_DELAY_MS: i64 = 4 * 3600 * 1000;
/// No attempt is made later than this after the event.
const GIVE_UP_AFTER_MS: i64 = 24 * 3600 * 1000;
/// How long the log keeps a delivery that ended (delivered, or given up).
pub const DELIVERIES_KEPT_MS: i64 = 30 * 24 * 3600 * 1000;
/// How often an instance forgets the deliveries older than that.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// The most of a receiver's answer kept in the log.
const EXCERPT_CHARS: usize = 500;

/// What every send needs, shared by the sender's tasks.
pub struct Sender {
    store: Store,
    /// The console's address as users reach it (events link there).
    base: String,
    allow_private: bool,
    /// Woken when this instance has written an event, so it goes out without waiting.
    pub wake: Arc<Notify>,
    slots: Arc<Semaphore>,
    /// Deliveries in flight per webhook.
    busy: Arc<Mutex<HashMap<String, usize>>>,
}

/// One webhook's place among the deliveries in flight, given back when dropped.
struct Busy {
    busy: Arc<Mutex<HashMap<String, usize>>>,
    webhook_id: String,
}

impl Busy {
    /// A place for one more delivery to `webhook_id`, unless it has all its places.
    fn take(busy: &Arc<Mutex<HashMap<String, usize>>>, webhook_id: &str) -> Option<Self> {
        let mut counts = busy.lock().expect("busy lock");
        let count = counts.entry(webhook_id.to_owned()).or_default();
        if *count >= IN_FLIGHT_PER_WEBHOOK {
            return None;
        }
        *count += 1;
        Some(Self {
            busy: busy.clone(),
            webhook_id: webhook_id.to_owned(),
        })
    }
}

impl Busy {
    /// The webhooks that have all their places taken.
    fn full(busy: &Arc<Mutex<HashMap<String, usize>>>) -> Vec<String> {
        let counts = busy.lock().expect("busy lock");
        counts
            .iter()
            .filter(|(_, n)| **n >= IN_FLIGHT_PER_WEBHOOK)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut counts = self.busy.lock().expect("busy lock");
        if let Some(count) = counts.get_mut(&self.webhook_id) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.webhook_id);
            }
        }
    }
}

/// When attempt `attempts` (1 for the first) failed at `now`, the next one's time, or
/// `None` when the day is over.
pub fn next_attempt_ms(occurred_ms: i64, attempts: i64, now: i64) -> Option<i64> {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
    let delay = FIRST_DELAY_MS
        .saturating_mul(1_i64 << doublings)
        .min(LONGEST_DELAY_MS);
    let next = now + delay;
    (next <= occurred_ms + GIVE_UP_AFTER_MS).then_some(next)
}

impl Sender {
    pub fn new(store: Store, base: String, allow_private: bool) -> Arc<Self> {
        Arc::new(Self {
            store,
            base,
            allow_private,
            wake: Arc::new(Notify::new()),
            slots: Arc::new(Semaphore::new(IN_FLIGHT)),
            busy: Arc::default(),
        })
    }

    /// Sends what is due until `shutdown` (attempts in flight then finish on their own
    /// within their timeout, or are taken over by another instance after the claim).
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut pruned = Instant::now();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            if let Err(e) = self.clone().send_due().await {
                tracing::warn!(error = %e, "webhook deliveries not sent; retrying");
            }
            if pruned.elapsed() >= PRUNE_EVERY {
                pruned = Instant::now();
                if let Err(e) = self.prune().await {
                    tracing::warn!(error = %e, "old webhook deliveries not forgotten");
                }
            }
        }
    }

    /// Forgets the deliveries that ended more than [`DELIVERIES_KEPT_MS`] ago.
    async fn prune(&self) -> anyhow::Result<()> {
        let mut tx = self.store.begin().await?;
        let forgotten = tx.prune_deliveries(now_ms() - DELIVERIES_KEPT_MS).await?;
        tx.commit().await?;
        if forgotten > 0 {
            tracing::info!(forgotten, "old webhook deliveries forgotten");
        }
        Ok(())
    }

    /// Claims what is due, as far as there are free slots, each sent in a task of its own.
    async fn send_due(self: Arc<Self>) -> anyhow::Result<()> {
        let free = self.slots.available_permits();
        if free == 0 {
            return Ok(());
        }
        let now = now_ms();
        let mut tx = self.store.begin_read().await?;
        let full = Busy::full(&self.busy);
        let due = tx
            .due_deliveries(now, i64::try_from(free).unwrap_or(i64::MAX), &full)
            .await?;
        tx.commit().await?;
        for delivery in due {
            let Some(place) = Busy::take(&self.busy, &delivery.webhook_id) else {
                continue;
            };
            let Ok(slot) = self.slots.clone().try_acquire_owned() else {
                break;
            };
            let mut tx = self.store.begin().await?;
            let mine = tx
                .claim_delivery(&delivery.id, delivery.attempts, now, now + CLAIM_MS)
                .await?;
            tx.commit().await?;
            if !mine {
                continue;
            }
            let sender = self.clone();
            tokio::spawn(async move {
                let id = delivery.id.clone();
                if let Err(e) = sender.attempt(delivery).await {
                    tracing::warn!(error = %e, delivery = %id, "webhook attempt not recorded");
                }
                drop((slot, place));
            });
        }
        Ok(())
    }

    /// One attempt of a claimed delivery, recorded.
    async fn attempt(&self, delivery: DueDelivery) -> anyhow::Result<()> {
        let attempt = delivery.attempts + 1;
        let at_ms = now_ms();
        let started = Instant::now();
        let outcome = tokio::time::timeout(SEND_TIMEOUT, self.send(&delivery))
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {} s", SEND_TIMEOUT.as_secs())));
        let latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let (status, excerpt, error) = match outcome {
            Ok((status, excerpt)) => (Some(i64::from(status)), excerpt, None),
            Err(why) => (None, String::new(), Some(why)),
        };
        let delivered = status.is_some_and(|s| (200..300).contains(&s));
        let next = match delivered {
            true => None,
            false => next_attempt_ms(delivery.occurred_ms, attempt, now_ms()),
        };
        if !delivered {
            tracing::info!(
                delivery = %delivery.id, attempt, status, error = error.as_deref(),
                next_attempt_ms = next, "webhook receiver did not take the event"
            );
        }
        let record = AttemptRecord {
            delivery_id: delivery.id.clone(),
            attempt,
            at_ms,
            status,
            latency_ms,
            excerpt,
            error,
        };
        let mut tx = self.store.begin().await?;
        tx.record_attempt(&record, next, delivered).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The request, signed; the receiver's status and the start of its answer, or why
    /// there was none.
    async fn send(&self, delivery: &DueDelivery) -> Result<(u16, String), String> {
        let url = parse_receiver(&delivery.url).map_err(|e| e.to_string())?;
        // Checked again at each attempt, and the request goes to the addresses checked:
        // a name that resolves elsewhere by now cannot lead it to a private one.
        let addresses = receiver_addresses(&url, self.allow_private)
            .await
            .map_err(|e: ReceiverRefused| e.to_string())?;
        let client = client_for(&url, &addresses).map_err(|e| e.to_string())?;
        let body = render(
            &delivery.format,
            &Event {
                event_type: &delivery.event_type,
                occurred_ms: delivery.occurred_ms,
                data: &delivery.data,
            },
            &self.base,
        );
        let timestamp = now_ms() / 1000;
        let signature = signatures(delivery, timestamp, &body)?;
        let mut response = client
            .post(url)
            .header("content-type", "application/json")
            .header(
                "user-agent",
                concat!("ratekeeper/", env!("CARGO_PKG_VERSION")),
            )
            .header("webhook-id", &delivery.id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await
            .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
        let status = response.status().as_u16();
        let mut excerpt = Vec::new();
        while excerpt.len() < EXCERPT_CHARS * 4 {
            match response.chunk().await {
                Ok(Some(chunk)) => excerpt.extend_from_slice(&chunk),
                _ => break,
            }
        }
        let excerpt: String = String::from_utf8_lossy(&excerpt)
            .chars()
            .filter(|c| !c.is_control() || *c == '\n')
            .take(EXCERPT_CHARS)
            .collect();
        Ok((status, excerpt))
    }
}

/// `v1,...` with the current secret, and with the previous one beside it while it still
/// signs (receivers that have not moved to the new one accept either).
fn signatures(delivery: &DueDelivery, timestamp: i64, body: &[u8]) -> Result<String, String> {
    let sign = |text: &str| {
        WebhookSecret::parse(text)
            .map(|secret| secret.sign(&delivery.id, timestamp, body))
            .map_err(|e| format!("the webhook's secret is unreadable: {e}"))
    };
    let mut header = sign(&delivery.secret)?;
    if let (Some(previous), Some(until)) = (&delivery.previous_secret, delivery.previous_until_ms)
        && until > now_ms()
    {
        header.push(' ');
        header.push_str(&sign(previous)?);
    }
    Ok(header)
}

/// A client that reaches `url`'s host only at `addresses` (those just checked), follows
/// no redirect (a redirect could lead past the check) and has its own timeout.
fn client_for(url: &Url, addresses: &[std::net::SocketAddr]) -> reqwest::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none());
    if let Some(url::Host::Domain(name)) = url.host() {
        builder = builder.resolve_to_addrs(name, addresses);
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_webhook_takes_at_most_its_places_and_gets_them_back() {
        let busy = Arc::default();
        let held: Vec<Busy> = (0..IN_FLIGHT_PER_WEBHOOK)
            .map(|_| Busy::take(&busy, "hanging").expect("a place"))
            .collect();
        assert!(
            Busy::take(&busy, "hanging").is_none(),
            "all its places are taken"
        );
        let other = Busy::take(&busy, "healthy").expect("another webhook still goes");
        drop(held);
        assert!(
            Busy::take(&busy, "hanging").is_some(),
            "its places came back"
        );
        drop(other);
        assert!(busy.lock().unwrap().get("healthy").is_none());
    }

    #[test]
    fn retries_double_from_two_seconds_to_four_hours_and_stop_after_a_day() {
        let t0 = 1_000_000;
        assert_eq!(next_attempt_ms(t0, 1, t0), Some(t0 + 2_000));
        assert_eq!(next_attempt_ms(t0, 2, t0 + 2_000), Some(t0 + 6_000));
        assert_eq!(next_attempt_ms(t0, 3, t0), Some(t0 + 8_000));
        assert_eq!(next_attempt_ms(t0, 20, t0), Some(t0 + LONGEST_DELAY_MS));
        assert_eq!(
            next_attempt_ms(t0, i64::MAX, t0),
            Some(t0 + LONGEST_DELAY_MS)
        );
        let late = t0 + GIVE_UP_AFTER_MS - 1_000;
        assert_eq!(next_attempt_ms(t0, 20, late), None);
        // The whole schedule: attempts until the day is over, then none.
        let (mut now, mut attempts) = (t0, 1);
        while let Some(next) = next_attempt_ms(t0, attempts, now) {
            now = next;
            attempts += 1;
        }
        assert!((15..=25).contains(&attempts), "{attempts} attempts");
        assert!(now <= t0 + GIVE_UP_AFTER_MS);
    }
}
