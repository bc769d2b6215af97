//! Audit events: listed newest first, with filters, visibility and pages.

use ratekeeper::store::{AuditFilter, AuditRecord, Store};
use serde_json::{Value, json};

use super::{entry, filter, fresh_store};
use crate::helpers::*;
use crate::on_every_backend;

/// Where the events `filter` selects stand in `all` (every event, newest first), checking
/// that they come in the same order.
async fn positions(store: &Store, all: &[AuditRecord], filter: AuditFilter) -> Vec<usize> {
    let mut tx = store.begin().await.unwrap();
    let found = tx.list_audit(&filter).await.unwrap();
    tx.commit().await.unwrap();
    let positions: Vec<usize> = found
        .iter()
        .map(|e| all.iter().position(|a| a == e).expect("a known event"))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "newest first");
    positions
}

async fn audit_events_are_listed_newest_first_with_filters(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let mut with_values = entry("ann", Some("shop"), "policy", "orders", "update");
    with_values.before = Some(json!({"rate": 0.2, "allowed_apps": ["shop"], "note": "ü ✓"}));
    with_values.after = Some(json!({"rate": 0.5, "allowed_apps": ["shop", "blog"]}));
    for e in [
        entry("cli", None, "user", "ann", "create"),
        entry("admin", Some("shop"), "app", "shop", "create"),
        entry("admin", Some("shop"), "policy", "orders", "create"),
        with_values,
        entry("bob", Some("blog"), "policy", "posts", "create"),
        entry("bob", Some("blog"), "api_key", "orders", "create"),
    ] {
        tx.record_audit(e).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let all = tx.list_audit(&filter()).await.unwrap();
    // Ended before `positions` opens its own: SQLite runs one transaction at a time.
    tx.commit().await.unwrap();
    let summary: Vec<(&str, &str, &str)> = all
        .iter()
        .map(|e| {
            (
                e.actor.as_str(),
                e.entity_type.as_str(),
                e.entity_id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("bob", "api_key", "orders"),
            ("bob", "policy", "posts"),
            ("ann", "policy", "orders"),
            ("admin", "policy", "orders"),
            ("admin", "app", "shop"),
            ("cli", "user", "ann"),
        ],
        "newest first"
    );
    assert!(all.windows(2).all(|w| w[0].id > w[1].id));
    assert!(all.iter().all(|e| e.at_ms > 0));

    // Before and after come back as the JSON that was recorded.
    let update = &all[2];
    assert_eq!(update.action, "update");
    assert_eq!(update.app_slug.as_deref(), Some("shop"));
    let parse = |s: &Option<String>| serde_json::from_str::<Value>(s.as_deref().unwrap()).unwrap();
    assert_eq!(
        parse(&update.before_json),
        json!({"rate": 0.2, "allowed_apps": ["shop"], "note": "ü ✓"})
    );
    assert_eq!(
        parse(&update.after_json),
        json!({"rate": 0.5, "allowed_apps": ["shop", "blog"]})
    );
    assert_eq!(all[0].before_json, None);
    assert_eq!(all[5].app_slug, None);

    // Positions in `all` (newest first) that each filter keeps.
    let by_app = positions(
        &store,
        &all,
        AuditFilter {
            app: Some("shop".into()),
            ..filter()
        },
    )
    .await;
    assert_eq!(by_app, [2, 3, 4]);
    let by_user = positions(
        &store,
        &all,
        AuditFilter {
            user: Some("bob".into()),
            ..filter()
        },
    )
    .await;
    assert_eq!(by_user, [0, 1]);
    // A policy filter takes policy events only (not the api_key whose id is "orders").
    let by_policy = positions(
        &store,
        &all,
        AuditFilter {
            policy: Some("orders".into()),
            ..filter()
        },
    )
    .await;
    assert_eq!(by_policy, [2, 3]);
    let combined = positions(
        &store,
        &all,
        AuditFilter {
            app: Some("shop".into()),
            user: Some("admin".into()),
            policy: Some("orders".into()),
            ..filter()
        },
    )
    .await;
    assert_eq!(combined, [3]);
    let visible = positions(
        &store,
        &all,
        AuditFilter {
            visible_apps: Some(vec!["blog".into()]),
            ..filter()
        },
    )
    .await;
    assert_eq!(
        visible,
        [0, 1],
        "only the apps one may see, never app-less events"
    );
    let visible = positions(
        &store,
        &all,
        AuditFilter {
            visible_apps: Some(vec!["blog".into(), "shop".into()]),
            app: Some("shop".into()),
            ..filter()
        },
    )
    .await;
    assert_eq!(visible, [2, 3, 4]);
    let none = positions(
        &store,
        &all,
        AuditFilter {
            visible_apps: Some(vec![]),
            ..filter()
        },
    )
    .await;
    assert!(none.is_empty(), "members of no application see nothing");

    // Pages.
    let page = |page: u32| {
        positions(
            &store,
            &all,
            AuditFilter {
                page,
                per_page: 4,
                ..filter()
            },
        )
    };
    assert_eq!(page(1).await, [0, 1, 2, 3]);
    assert_eq!(page(2).await, [4, 5]);
    assert!(page(3).await.is_empty());
    assert_eq!(page(0).await, [0, 1, 2, 3], "page 0 is the first page");
}
on_every_backend!(audit, audit_events_are_listed_newest_first_with_filters);
