//! Applications: stored and listed by slug, a slug taken once.

use ratekeeper::domain::AppSlug;
use ratekeeper::store::StoreError;

use super::{add_app, fresh_store, slugs};
use crate::helpers::*;
use crate::on_every_backend;

async fn applications_are_stored_and_listed_by_slug(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = tx
        .insert_app(
            &AppSlug::parse("shop").unwrap(),
            "The Shop",
            "orders – and carts ✓",
        )
        .await
        .unwrap();
    let blog = add_app(&mut tx, "blog").await;
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.app_by_slug("shop").await.unwrap(), Some(shop.clone()));
    assert_eq!(
        tx.app_by_slug("shop").await.unwrap().unwrap().description,
        "orders – and carts ✓",
        "text survives as sent"
    );
    assert_eq!(tx.app_by_slug("wiki").await.unwrap(), None);
    assert_eq!(
        tx.list_apps().await.unwrap(),
        [blog.clone(), shop.clone()],
        "ordered by slug"
    );
    assert_eq!(
        tx.unknown_slugs(&slugs(&["wiki", "shop", "mail", "blog"]))
            .await
            .unwrap(),
        ["wiki", "mail"]
    );
    assert!(tx.unknown_slugs(&[]).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let err = tx
        .insert_app(&AppSlug::parse("shop").unwrap(), "Another", "")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict), "{err:?}");
    drop(tx);
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.app_by_slug("shop").await.unwrap(), Some(shop));
}
on_every_backend!(apps, applications_are_stored_and_listed_by_slug);
