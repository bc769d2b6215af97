//! Users: stored, found by their exact name, a name taken once.

use ratekeeper::domain::Username;
use ratekeeper::store::{StoreError, now_ms};

use super::{add_user, fresh_store};
use crate::helpers::*;
use crate::on_every_backend;

async fn users_are_stored_and_found_by_name(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let before = now_ms();
    let ann = tx
        .insert_user(&Username::parse("ann").unwrap(), "$argon2id$ann", true)
        .await
        .unwrap();
    let bob = add_user(&mut tx, "bob").await;
    tx.commit().await.unwrap();
    assert!(ann.created_ms >= before && ann.created_ms <= now_ms());
    assert_ne!(ann.id, bob.id);

    let mut tx = store.begin().await.unwrap();
    let found = tx
        .user_by_name("ann")
        .await
        .unwrap()
        .expect("ann is stored");
    assert_eq!(found.id, ann.id);
    assert_eq!(found.username, "ann");
    assert_eq!(found.password_hash, "$argon2id$ann");
    assert!(found.is_admin());
    assert!(!found.is_disabled());
    assert_eq!(found.created_ms, ann.created_ms);
    let found = tx.user_by_name("bob").await.unwrap().unwrap();
    assert!(!found.is_admin());
    assert!(tx.user_by_name("carol").await.unwrap().is_none());
    assert!(
        tx.user_by_name("ANN").await.unwrap().is_none(),
        "names are exact"
    );
    assert_eq!(tx.count_users().await.unwrap(), 2);
    tx.commit().await.unwrap();

    // A name is taken once.
    let mut tx = store.begin().await.unwrap();
    let err = tx
        .insert_user(&Username::parse("ann").unwrap(), "x", false)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict), "{err:?}");
    drop(tx);
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.count_users().await.unwrap(), 2);
}
on_every_backend!(users, users_are_stored_and_found_by_name);
