//! The webhooks' outbox: one instance wins each claim of a due delivery, an attempt ends
//! it or makes it due again, and the log forgets only deliveries that ended long ago.

use ratekeeper::domain::WebhookEvent;
use ratekeeper::store::{AttemptRecord, NewWebhook, now_ms};

use super::{add_app, fresh_store};
use crate::helpers::*;
use crate::on_every_backend;

fn attempt(delivery_id: &str, attempt: i64, status: i64) -> AttemptRecord {
    AttemptRecord {
        delivery_id: delivery_id.to_owned(),
        attempt,
        at_ms: now_ms(),
        status: Some(status),
        latency_ms: 12,
        excerpt: "ok".into(),
        error: None,
    }
}

async fn deliveries_are_claimed_once_attempted_and_forgotten_when_old(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    let hook = tx
        .insert_webhook(&NewWebhook {
            app_id: &shop.id,
            url: "https://hooks.example.com/rk",
            format: "json",
            events: "policy.denying,policy.changed",
            quiet_period_ms: 300_000,
            near_limit_below: 0.1,
            secret: "whsec_c2VjcmV0IG9mIGEgdGVzdCBvZiB0aGUgc3RvcmUhIQ==",
            created_by: "ann",
        })
        .await
        .unwrap();
    let now = now_ms();
    let long_ago = now - 40 * 24 * 3600 * 1000;
    let old_done = tx
        .enqueue_delivery(&hook.id, "policy.changed", "{}", long_ago)
        .await
        .unwrap()
        .unwrap();
    let old_pending = tx
        .enqueue_delivery(&hook.id, "policy.changed", "{}", long_ago)
        .await
        .unwrap()
        .unwrap();
    let fresh = tx
        .enqueue_delivery(&hook.id, "policy.denying", r#"{"policy":"p"}"#, now)
        .await
        .unwrap()
        .unwrap();
    // A webhook gone (deleted since its event was seen) takes no event.
    assert_eq!(
        tx.enqueue_delivery("0123456789abcdef", "policy.changed", "{}", now)
            .await
            .unwrap(),
        None
    );
    // An event of the application, for each webhook that listens: this one.
    assert_eq!(
        tx.enqueue_event("shop", WebhookEvent::Changed, "{}", now)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        tx.enqueue_event("shop", WebhookEvent::Recovered, "{}", now)
            .await
            .unwrap(),
        0
    );
    tx.commit().await.unwrap();

    // Two instances read the same due row; one claim wins.
    let mut tx = store.begin().await.unwrap();
    let due = tx.due_deliveries(now, 10, &[]).await.unwrap();
    assert_eq!(due.len(), 4);
    // Those of a webhook this instance sends to as much as it may are left out.
    let skipping = [hook.id.clone(), "another".to_owned()];
    assert!(
        tx.due_deliveries(now, 10, &skipping)
            .await
            .unwrap()
            .is_empty()
    );
    let first = due.iter().find(|d| d.id == fresh).unwrap();
    assert_eq!(
        (first.url.as_str(), first.attempts),
        ("https://hooks.example.com/rk", 0)
    );
    assert!(
        tx.claim_delivery(&fresh, 0, now, now + 60_000)
            .await
            .unwrap()
    );
    assert!(
        !tx.claim_delivery(&fresh, 0, now, now + 60_000)
            .await
            .unwrap(),
        "claimed already"
    );
    // A claimed row is not due for the others until its claim lapses.
    assert!(
        tx.due_deliveries(now, 10, &[])
            .await
            .unwrap()
            .iter()
            .all(|d| d.id != fresh)
    );
    // A failed attempt makes it due again later; a delivered one ends it.
    tx.record_attempt(&attempt(&fresh, 1, 500), Some(now + 2_000), false)
        .await
        .unwrap();
    assert!(
        tx.due_deliveries(now, 10, &[])
            .await
            .unwrap()
            .iter()
            .all(|d| d.id != fresh)
    );
    assert!(
        tx.claim_delivery(&fresh, 1, now + 2_000, now + 62_000)
            .await
            .unwrap()
    );
    tx.record_attempt(&attempt(&fresh, 2, 204), None, true)
        .await
        .unwrap();
    assert!(
        tx.claim_delivery(&old_done, 0, now, now + 60_000)
            .await
            .unwrap()
    );
    tx.record_attempt(&attempt(&old_done, 1, 200), None, true)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let log = tx.deliveries_of(&hook.id, 10).await.unwrap();
    let fresh_row = log.iter().find(|d| d.id == fresh).unwrap();
    assert_eq!((fresh_row.attempts, fresh_row.next_attempt_ms), (2, None));
    assert!(fresh_row.delivered_ms.is_some());
    let attempts = tx.attempts_of(&hook.id, long_ago).await.unwrap();
    let statuses: Vec<_> = attempts
        .iter()
        .filter(|a| a.delivery_id == fresh)
        .map(|a| a.status)
        .collect();
    assert_eq!(statuses, [Some(500), Some(204)]);

    // Only what ended before the cut goes: the old pending one stays, with the fresh ones.
    assert_eq!(
        tx.prune_deliveries(now - 30 * 24 * 3600 * 1000)
            .await
            .unwrap(),
        1
    );
    let left: Vec<String> = tx
        .deliveries_of(&hook.id, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert!(!left.contains(&old_done) && left.contains(&old_pending) && left.contains(&fresh));
    assert!(
        tx.attempts_of(&hook.id, long_ago)
            .await
            .unwrap()
            .iter()
            .all(|a| a.delivery_id != old_done)
    );
    // Send again: due at once, whatever became of it.
    assert!(tx.send_again(&hook.id, &fresh).await.unwrap());
    assert!(!tx.send_again(&hook.id, "msg_nothing").await.unwrap());
    assert!(
        tx.due_deliveries(now_ms(), 10, &[])
            .await
            .unwrap()
            .iter()
            .any(|d| d.id == fresh)
    );
    // A webhook deleted takes its deliveries and their attempts.
    assert!(tx.delete_webhook(&shop.id, &hook.id).await.unwrap());
    assert!(tx.deliveries_of(&hook.id, 10).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}
on_every_backend!(
    deliveries_are_claimed_once_attempted_and_forgotten_when_old,
    deliveries_are_claimed_once_attempted_and_forgotten_when_old
);
