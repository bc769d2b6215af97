//! Connecting and migrating: idempotent migrations that start from an empty store.

use ratekeeper::store::{Backend, Store};
use secrecy::SecretString;

use super::{add_user, filter};
use crate::helpers::*;
use crate::on_every_backend;

async fn migrations_are_idempotent_and_start_empty(db: Db) {
    let url = fresh_database(db).await;
    let store = Store::connect(&SecretString::from(url.clone()))
        .await
        .unwrap();
    let expected = match db {
        Db::Sqlite => Backend::Sqlite,
        Db::Postgres => Backend::Postgres,
        Db::MySql => Backend::MySql,
    };
    assert_eq!(store.backend(), expected);
    store.migrate().await.expect("first run");
    store.migrate().await.expect("second run");
    store.ping().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.count_users().await.unwrap(), 0);
    assert!(tx.list_apps().await.unwrap().is_empty());
    assert!(tx.list_policies(None).await.unwrap().is_empty());
    assert!(tx.key_grants().await.unwrap().is_empty());
    assert!(tx.list_audit(&filter()).await.unwrap().is_empty());
    add_user(&mut tx, "ann").await;
    tx.commit().await.unwrap();
    store.close().await;

    // Another instance starting on the same database migrates nothing and keeps the data.
    let again = Store::connect(&SecretString::from(url)).await.unwrap();
    again
        .migrate()
        .await
        .expect("a third run, from another pool");
    let mut tx = again.begin().await.unwrap();
    assert_eq!(tx.count_users().await.unwrap(), 1);
}
on_every_backend!(migrations, migrations_are_idempotent_and_start_empty);
