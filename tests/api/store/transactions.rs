//! Transactions: a dropped one leaves nothing; two side by side both write, in order; a
//! deadlock aborts one of two, as an error worth retrying.

use ratekeeper::domain::{MemberRole, Username};
use ratekeeper::store::{StoreError, Tx};

use super::{add_app, add_user, entry, filter, fresh_store, fresh_store_at, spec};
use crate::helpers::*;
use crate::on_every_backend;
use crate::on_row_locking_backends;

async fn a_transaction_dropped_without_commit_leaves_nothing(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let kept = add_app(&mut tx, "kept").await;
    tx.commit().await.unwrap();

    {
        let mut tx = store.begin().await.unwrap();
        let ann = add_user(&mut tx, "ann").await;
        let shop = add_app(&mut tx, "shop").await;
        tx.set_membership(&shop.id, &ann.id, MemberRole::Owner)
            .await
            .unwrap();
        tx.set_membership(&kept.id, &ann.id, MemberRole::Viewer)
            .await
            .unwrap();
        tx.insert_api_key(
            &kept.id,
            "ghost",
            &"f".repeat(64),
            "rk_key_ffff",
            "ann",
            None,
        )
        .await
        .unwrap();
        let policy = tx
            .insert_policy(&kept.id, &spec("kept.policy", "kept", 1.0, 1, &["kept"]))
            .await
            .unwrap();
        tx.update_policy(&policy, &spec("kept.policy", "kept", 2.0, 2, &["kept"]))
            .await
            .unwrap();
        tx.record_audit(entry("ann", Some("kept"), "app", "shop", "create"))
            .await
            .unwrap();
        // Inside the transaction, its writes are visible.
        assert!(tx.app_by_slug("shop").await.unwrap().is_some());
        // Dropped here: an error path that returned early.
    }

    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.count_users().await.unwrap(), 0);
    assert_eq!(tx.list_apps().await.unwrap(), std::slice::from_ref(&kept));
    assert!(tx.list_members(&kept.id).await.unwrap().is_empty());
    assert!(tx.list_api_keys(&kept.id).await.unwrap().is_empty());
    assert!(tx.key_grants().await.unwrap().is_empty());
    assert!(tx.list_policies(None).await.unwrap().is_empty());
    assert!(tx.list_audit(&filter()).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    // And the store is usable as before: the same rows can now be written for real. (In a
    // transaction of its own: on SQLite, one that has read cannot write while the dropped
    // one's rollback is still on its way, see `interleaved_writes`.)
    let mut tx = store.begin().await.unwrap();
    let ann = add_user(&mut tx, "ann").await;
    add_app(&mut tx, "shop").await;
    tx.set_membership(&kept.id, &ann.id, MemberRole::Viewer)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.count_users().await.unwrap(), 1);
    assert_eq!(tx.list_apps().await.unwrap().len(), 2);
}
on_every_backend!(
    rollback,
    a_transaction_dropped_without_commit_leaves_nothing
);

/// A transaction that has read may still write after another one committed meanwhile.
///
/// On PostgreSQL and MariaDB the second transaction runs whole, begun and committed,
/// while the first is open between its read and its write: the overlap is certain, since
/// the first waits for the second to finish. On SQLite the first holds the write lock from
/// its start (BEGIN IMMEDIATE), so the second cannot run inside it: there the test asserts
/// what holds however the two are scheduled, that the second waits its turn and writes
/// after the first's commit (it sees the first's row), without a "database is locked".
async fn interleaved_transactions_both_write(db: Db) {
    let store = fresh_store(db).await;
    let mut first = store.begin().await.unwrap();
    assert_eq!(first.count_users().await.unwrap(), 0);

    let other = store.clone();
    let mut second = Some(tokio::spawn(async move {
        let mut second = other.begin().await.unwrap();
        let seen = second.count_users().await.unwrap();
        add_user(&mut second, "bob").await;
        second.commit().await.unwrap();
        seen
    }));
    if db != Db::Sqlite {
        let seen = second.take().unwrap().await;
        let seen = seen.expect("the second transaction commits");
        assert_eq!(seen, 0, "the second ran inside the first, before its write");
    }

    first
        .insert_user(&Username::parse("ann").unwrap(), "x", false)
        .await
        .expect("the first transaction writes");
    first.commit().await.unwrap();
    if let Some(second) = second {
        let seen = second.await.expect("the second transaction commits too");
        assert_eq!(seen, 1, "the second waited for the first's commit");
    }
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.count_users().await.unwrap(), 2);
}

/// A change reads its policy locked: a second change of the same policy waits for the
/// first to commit and then starts from the version the first made, so no change is lost
/// and no version check fails for a client that sent none.
///
/// On PostgreSQL and MariaDB the first commits only once the server shows the second
/// waiting for the row lock, so the two certainly overlap. SQLite shows no lock waits; there
/// the test asserts what holds however the two are scheduled: the second starts from the
/// first's version.
async fn a_locked_read_waits_for_the_change_before_it(db: Db) {
    let (store, url) = fresh_store_at(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    tx.insert_policy(&shop.id, &spec("orders", "shop", 1.0, 5, &["shop"]))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut first = store.begin().await.unwrap();
    let seen = first
        .policy_by_name_for_update("orders")
        .await
        .unwrap()
        .unwrap();

    let other = store.clone();
    let second = tokio::spawn(async move {
        let mut second = other.begin().await.unwrap();
        let current = second
            .policy_by_name_for_update("orders")
            .await
            .unwrap()
            .unwrap();
        let done = second
            .update_policy(&current, &spec("orders", "shop", 3.0, 5, &["shop"]))
            .await
            .unwrap()
            .expect("the second change starts from the first's version");
        second.commit().await.unwrap();
        (current.version, done)
    });

    if db != Db::Sqlite {
        assert!(
            lock_waits_reach(&url, db, 1).await,
            "the second change never waited for the first's lock"
        );
        assert!(!second.is_finished(), "and has not got past it");
    }

    let won = first
        .update_policy(&seen, &spec("orders", "shop", 2.0, 5, &["shop"]))
        .await
        .unwrap()
        .expect("the first change applies");
    first.commit().await.unwrap();
    let (second_saw, second_made) = second.await.unwrap();
    assert_eq!(second_saw, won.version, "the second waited for the first");
    assert_eq!(second_made.version, won.version + 1);

    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        tx.policy_by_name("orders").await.unwrap(),
        Some(second_made)
    );
}

on_every_backend!(interleaved_writes, interleaved_transactions_both_write);
on_every_backend!(locked_reads, a_locked_read_waits_for_the_change_before_it);

/// Two transactions that each lock a row the other then asks for: the server breaks the
/// deadlock by aborting one, which the store reports as `Aborted` (nothing of it saved,
/// safe to run again), and the other goes on. Not on SQLite, whose one writer at a time
/// cannot deadlock.
async fn a_deadlock_aborts_one_transaction_as_retryable(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    // Of two applications: MariaDB's locking read locks the joined application's row too.
    for (name, owner) in [("x", "shop"), ("y", "billing")] {
        let app = add_app(&mut tx, owner).await;
        tx.insert_policy(&app.id, &spec(name, owner, 1.0, 5, &[owner]))
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let mut first = store.begin().await.unwrap();
    first.policy_by_name_for_update("x").await.unwrap();
    let mut second = store.begin().await.unwrap();
    second.policy_by_name_for_update("y").await.unwrap();

    // Each asks for the other's row; each ends (rolls back) as soon as it has an answer,
    // so that the survivor's wait ends with the victim.
    let cross = |mut tx: Tx, name: &'static str| async move {
        let locked = tx.policy_by_name_for_update(name).await.map(|_| ());
        drop(tx);
        locked
    };
    let (a, b) = tokio::join!(cross(first, "y"), cross(second, "x"));
    let aborted = [&a, &b]
        .iter()
        .filter(|r| matches!(r, Err(StoreError::Aborted(_))))
        .count();
    assert_eq!(aborted, 1, "{a:?} {b:?}");
    assert!(a.is_ok() || b.is_ok(), "{a:?} {b:?}");
}

on_row_locking_backends!(deadlocks, a_deadlock_aborts_one_transaction_as_retryable);
