//! Policies: every field round-trips, versions, unique names, deletion.

use futures_util::TryStreamExt;
use ratekeeper::domain::{FailureMode, MaxPermits, Rate};
use ratekeeper::store::{PolicyRecord, StoreError, now_ms};

use super::{add_app, fresh_store, slugs, spec};
use crate::helpers::*;
use crate::on_every_backend;

async fn a_policy_round_trips_every_field(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    add_app(&mut tx, "zeta").await;
    add_app(&mut tx, "alpha").await;
    let mut full = spec(
        "api/v1:orders.create-x_y",
        "shop",
        0.2,
        12,
        &["zeta", "shop", "alpha"],
    );
    full.failure_mode = FailureMode::Open;
    full.enabled = false;
    full.description = "Bestellungen – 12 per minute ✓".to_owned();
    let before = now_ms();
    let inserted = tx.insert_policy(&shop.id, &full).await.unwrap();
    let plain = tx
        .insert_policy(
            &shop.id,
            &spec("exports", "shop", 1_000_000.0, 1_000_000_000, &["shop"]),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(inserted.version, 1);
    assert_eq!(inserted.spec, full);
    assert_eq!(inserted.created_ms, inserted.updated_ms);
    assert!(inserted.created_ms >= before && inserted.created_ms <= now_ms());

    let mut tx = store.begin().await.unwrap();
    let read = tx
        .policy_by_name("api/v1:orders.create-x_y")
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(read, inserted, "every field as written");
    assert_eq!(
        read.spec.rate.map(Rate::get),
        Some(0.2),
        "the fraction is kept exactly"
    );
    assert_eq!(
        read.spec.allowed_apps,
        slugs(&["zeta", "shop", "alpha"]),
        "in the order given"
    );
    assert_eq!(
        tx.policy_by_name("exports").await.unwrap(),
        Some(plain.clone())
    );
    assert_eq!(tx.policy_by_name("EXPORTS").await.unwrap(), None);
    assert_eq!(tx.policy_by_name("nothing").await.unwrap(), None);
    let names = |list: Vec<PolicyRecord>| -> Vec<String> {
        list.into_iter().map(|p| p.spec.name.to_string()).collect()
    };
    assert_eq!(
        names(tx.list_policies(Some(&shop.id)).await.unwrap()),
        ["api/v1:orders.create-x_y", "exports"]
    );
    assert_eq!(
        tx.list_policies(None).await.unwrap(),
        [inserted.clone(), plain.clone()]
    );
    let streamed: Vec<PolicyRecord> = tx.each_policy().try_collect().await.unwrap();
    assert_eq!(
        streamed,
        [inserted, plain],
        "the reload's read: the same, in order"
    );
}
on_every_backend!(policy_round_trip, a_policy_round_trips_every_field);

async fn a_policy_changes_only_from_its_current_version(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    add_app(&mut tx, "blog").await;
    let v1 = tx
        .insert_policy(&shop.id, &spec("orders", "shop", 10.0, 20, &["shop"]))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut changed = v1.spec.clone();
    changed.rate = Some(Rate::parse_field("rate", 0.5).unwrap());
    changed.allowed_apps = slugs(&["blog", "shop"]);
    changed.failure_mode = FailureMode::Open;
    changed.description = "halved".into();
    let mut tx = store.begin().await.unwrap();
    let v2 = tx
        .update_policy(&v1, &changed)
        .await
        .unwrap()
        .expect("v1 is current");
    tx.commit().await.unwrap();
    assert_eq!(v2.version, 2);
    assert_eq!(v2.spec, changed);
    assert_eq!(
        (v2.id.as_str(), v2.created_ms),
        (v1.id.as_str(), v1.created_ms)
    );
    assert!(v2.updated_ms >= v1.updated_ms);

    // A change made from version 1, now stale, is refused and changes nothing.
    let mut stale = v1.spec.clone();
    stale.max_permits = MaxPermits::parse_field("max_permits", 999).unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.update_policy(&v1, &stale).await.unwrap(), None);
    tx.commit().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.policy_by_name("orders").await.unwrap(), Some(v2.clone()));

    // From version 2 it applies.
    let v3 = tx.update_policy(&v2, &stale).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    assert_eq!(v3.version, 3);
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.policy_by_name("orders").await.unwrap(), Some(v3));
}
on_every_backend!(
    policy_versions,
    a_policy_changes_only_from_its_current_version
);

async fn a_policy_name_is_unique_and_deleted_policies_are_gone(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    let blog = add_app(&mut tx, "blog").await;
    let first = tx
        .insert_policy(&shop.id, &spec("orders", "shop", 1.0, 5, &["shop"]))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // The same name again, even for another application.
    let mut tx = store.begin().await.unwrap();
    let err = tx
        .insert_policy(&blog.id, &spec("orders", "blog", 9.0, 9, &["blog"]))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict), "{err:?}");
    drop(tx);
    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        tx.policy_by_name("orders").await.unwrap(),
        Some(first.clone())
    );
    tx.commit().await.unwrap();

    // Names differ by case: another policy.
    let mut tx = store.begin().await.unwrap();
    tx.insert_policy(&blog.id, &spec("Orders", "blog", 9.0, 9, &["blog"]))
        .await
        .expect("names are case-sensitive");
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    assert!(tx.delete_policy(&first.id).await.unwrap());
    assert!(!tx.delete_policy(&first.id).await.unwrap(), "already gone");
    tx.commit().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.policy_by_name("orders").await.unwrap(), None);
    assert!(tx.list_policies(Some(&shop.id)).await.unwrap().is_empty());
    assert!(tx.policy_by_name("Orders").await.unwrap().is_some());
    // The name is free again.
    let again = tx
        .insert_policy(&shop.id, &spec("orders", "shop", 2.0, 2, &["shop"]))
        .await
        .unwrap();
    assert_ne!(again.id, first.id);
    tx.commit().await.unwrap();
}
on_every_backend!(
    policy_names,
    a_policy_name_is_unique_and_deleted_policies_are_gone
);
