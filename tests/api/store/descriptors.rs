//! Descriptor patterns: stored with their policy, changed, listed, kept in its history.

use ratekeeper::domain::{DescriptorPattern, Scope};

use super::{add_app, fresh_store, spec};
use crate::helpers::*;
use crate::on_every_backend;

fn pattern(line: &str) -> DescriptorPattern {
    DescriptorPattern::parse_line("descriptors[0]", line).unwrap()
}

async fn descriptor_patterns_round_trip(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    let mut keyed = spec("users", "shop", 1.0, 5, &["shop"]);
    keyed.scope = Scope::PerKey;
    keyed.descriptors = vec![
        pattern("edge: database=users, user_id"),
        pattern("path=/api/Bestellungen ✓ {x}|y, user_id"),
        pattern("a:b=c=d, e"),
    ];
    let inserted = tx.insert_policy(&shop.id, &keyed).await.unwrap();
    tx.record_policy_version(&inserted, "alice", "create", None)
        .await
        .unwrap();
    let plain = tx
        .insert_policy(&shop.id, &spec("plain", "shop", 1.0, 5, &["shop"]))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let read = tx.policy_by_name("users").await.unwrap().expect("stored");
    assert_eq!(
        read.spec.descriptors, keyed.descriptors,
        "every pattern as written"
    );
    assert_eq!(
        read.spec.descriptors[2].entries[0].value.as_deref(),
        Some("c=d")
    );
    assert_eq!(
        tx.policy_by_name("plain").await.unwrap(),
        Some(plain.clone()),
        "none stays none"
    );
    let declaring = tx.policies_with_descriptors().await.unwrap();
    assert_eq!(
        declaring,
        std::slice::from_ref(&read),
        "only the policies that declare some"
    );

    let mut changed = read.spec.clone();
    changed.descriptors = vec![pattern("user_id")];
    let updated = tx.update_policy(&read, &changed).await.unwrap().unwrap();
    tx.record_policy_version(&updated, "alice", "update", None)
        .await
        .unwrap();
    let mut emptied = plain.spec.clone();
    emptied.descriptors = vec![pattern("generic_key=plain")];
    tx.update_policy(&plain, &emptied).await.unwrap().unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let read = tx.policy_by_name("users").await.unwrap().unwrap();
    assert_eq!(read.spec.descriptors, [pattern("user_id")]);
    assert_eq!(tx.policies_with_descriptors().await.unwrap().len(), 2);
    let history = tx.policy_versions(&read.id, None, 10).await.unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(history[0].spec.descriptors, [pattern("user_id")]);
    assert_eq!(
        history[1].spec.descriptors, keyed.descriptors,
        "a version keeps the patterns it had"
    );
    tx.commit().await.unwrap();
}
on_every_backend!(descriptors_round_trip, descriptor_patterns_round_trip);
