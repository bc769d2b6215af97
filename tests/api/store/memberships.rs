//! Memberships: a role set, changed and removed.

use ratekeeper::domain::MemberRole;

use super::{add_app, add_user, fresh_store};
use crate::helpers::*;
use crate::on_every_backend;

async fn a_membership_is_set_changed_and_removed(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    let blog = add_app(&mut tx, "blog").await;
    let ann = add_user(&mut tx, "ann").await;
    let bob = add_user(&mut tx, "bob").await;
    tx.commit().await.unwrap();

    // Set: there was no role before.
    let mut tx = store.begin().await.unwrap();
    let previous = tx
        .set_membership(&shop.id, &bob.id, MemberRole::Viewer)
        .await
        .unwrap();
    assert_eq!(previous, None);
    assert_eq!(
        tx.set_membership(&shop.id, &ann.id, MemberRole::Owner)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        tx.set_membership(&blog.id, &bob.id, MemberRole::Owner)
            .await
            .unwrap(),
        None
    );
    tx.commit().await.unwrap();

    // Set again: an update, which returns the role it replaced.
    let mut tx = store.begin().await.unwrap();
    let previous = tx
        .set_membership(&shop.id, &bob.id, MemberRole::Owner)
        .await
        .unwrap();
    assert_eq!(previous, Some(MemberRole::Viewer));
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        tx.role_in_app(&shop.id, &bob.id).await.unwrap(),
        Some(MemberRole::Owner)
    );
    assert_eq!(tx.role_in_app(&blog.id, &ann.id).await.unwrap(), None);
    let members: Vec<(String, String)> = tx
        .list_members(&shop.id)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.username, m.role))
        .collect();
    assert_eq!(
        members,
        [
            ("ann".to_owned(), "owner".to_owned()),
            ("bob".to_owned(), "owner".to_owned())
        ],
        "one row per member, by name"
    );
    let of_bob: Vec<String> = tx
        .list_apps_of_user(&bob.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.slug)
        .collect();
    assert_eq!(of_bob, ["blog", "shop"]);
    tx.commit().await.unwrap();

    // Remove: returns the role it had; a second time there is none.
    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        tx.delete_membership(&shop.id, &bob.id).await.unwrap(),
        Some(MemberRole::Owner)
    );
    assert_eq!(tx.delete_membership(&shop.id, &bob.id).await.unwrap(), None);
    tx.commit().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.role_in_app(&shop.id, &bob.id).await.unwrap(), None);
    let of_bob: Vec<String> = tx
        .list_apps_of_user(&bob.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.slug)
        .collect();
    assert_eq!(of_bob, ["blog"]);
    assert_eq!(tx.list_members(&shop.id).await.unwrap().len(), 1);
}
on_every_backend!(memberships, a_membership_is_set_changed_and_removed);
