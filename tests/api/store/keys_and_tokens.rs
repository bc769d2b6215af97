//! API keys (listed, granted, revoked, touched) and personal access tokens.

use ratekeeper::store::{KeyGrant, StoreError, TokenTerms};

use super::{add_app, add_user, fresh_store};
use crate::helpers::*;
use crate::on_every_backend;

async fn api_keys_are_listed_granted_revoked_and_touched(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    let blog = add_app(&mut tx, "blog").await;
    let k1 = tx
        .insert_api_key(
            &shop.id,
            "checkout",
            &"a".repeat(64),
            "rk_key_aaaa",
            "ann",
            None,
        )
        .await
        .unwrap();
    let k2 = tx
        .insert_api_key(
            &shop.id,
            "rotation",
            &"b".repeat(64),
            "rk_key_bbbb",
            "ann",
            None,
        )
        .await
        .unwrap();
    let k3 = tx
        .insert_api_key(&blog.id, "cms", &"c".repeat(64), "rk_key_cccc", "bob", None)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!((k1.last_used_ms, k1.revoked_ms), (None, None));

    let mut tx = store.begin().await.unwrap();
    let listed = tx.list_api_keys(&shop.id).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&k1) && listed.contains(&k2));
    assert_eq!(
        tx.list_api_keys(&blog.id).await.unwrap(),
        std::slice::from_ref(&k3)
    );
    let mut grants = tx.key_grants().await.unwrap();
    grants.sort_by(|a, b| a.key_hash.cmp(&b.key_hash));
    let grant = |hash: char, id: &str, app: &str| KeyGrant {
        key_hash: hash.to_string().repeat(64),
        key_id: id.to_owned(),
        app_slug: app.to_owned(),
        expires_ms: None,
        revoked_ms: None,
    };
    assert_eq!(
        grants,
        [
            grant('a', &k1.id, "shop"),
            grant('b', &k2.id, "shop"),
            grant('c', &k3.id, "blog"),
        ]
    );
    tx.commit().await.unwrap();

    // A key is revoked only through its own application, and only once.
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.revoke_api_key(&blog.id, &k1.id).await.unwrap(), None);
    let before = tx.revoke_api_key(&shop.id, &k1.id).await.unwrap();
    assert_eq!(before, Some(k1.clone()), "the key as it was");
    assert_eq!(tx.revoke_api_key(&shop.id, &k1.id).await.unwrap(), None);
    assert_eq!(
        tx.revoke_api_key(&shop.id, "nosuchkey").await.unwrap(),
        None
    );
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let revoked = tx
        .list_api_keys(&shop.id)
        .await
        .unwrap()
        .into_iter()
        .find(|k| k.id == k1.id)
        .expect("a revoked key stays listed");
    assert!(revoked.revoked_ms.is_some());
    let grants = tx.key_grants().await.unwrap();
    let live: Vec<String> = grants
        .iter()
        .filter(|g| g.revoked_ms.is_none())
        .map(|g| g.key_id.clone())
        .collect();
    assert!(!live.contains(&k1.id), "revoked keys grant nothing");
    // A key revoked lately is still known, as revoked: its application hears of its use.
    assert!(
        grants
            .iter()
            .any(|g| g.key_id == k1.id && g.revoked_ms == revoked.revoked_ms)
    );
    assert!(live.contains(&k2.id) && live.contains(&k3.id));
    tx.commit().await.unwrap();

    // Last use only moves forward.
    let last_used = |keys: Vec<ratekeeper::store::ApiKeyRecord>, id: &str| {
        keys.into_iter().find(|k| k.id == id).unwrap().last_used_ms
    };
    for (at, expected) in [(1_000, 1_000), (500, 1_000), (2_000, 2_000), (2_000, 2_000)] {
        let mut tx = store.begin().await.unwrap();
        tx.touch_api_keys(&[(k2.id.clone(), at), ("nosuchkey".to_owned(), at)])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let keys = tx.list_api_keys(&shop.id).await.unwrap();
        assert_eq!(last_used(keys, &k2.id), Some(expected), "touched at {at}");
    }
    let mut tx = store.begin().await.unwrap();
    tx.touch_api_keys(&[]).await.unwrap();
    let keys = tx.list_api_keys(&blog.id).await.unwrap();
    assert_eq!(last_used(keys, &k3.id), None, "untouched keys keep none");

    // The same key text twice is refused.
    let err = tx
        .insert_api_key(
            &blog.id,
            "copy",
            &"a".repeat(64),
            "rk_key_aaaa",
            "bob",
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict), "{err:?}");
}
on_every_backend!(api_keys, api_keys_are_listed_granted_revoked_and_touched);

async fn an_access_token_names_its_user(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let ann = add_user(&mut tx, "ann").await;
    let token_id = tx
        .insert_access_token(&ann.id, "laptop", &"d".repeat(64), TokenTerms::default())
        .await
        .unwrap();
    // A read-only token that expired a second ago, and one that expires in an hour.
    let now = ratekeeper::store::now_ms();
    let read_only_until = |expires_ms| TokenTerms {
        expires_ms: Some(expires_ms),
        read_only: true,
    };
    tx.insert_access_token(
        &ann.id,
        "gone",
        &"f".repeat(64),
        read_only_until(now - 1000),
    )
    .await
    .unwrap();
    tx.insert_access_token(
        &ann.id,
        "ci",
        &"a".repeat(64),
        read_only_until(now + 3_600_000),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let owner = tx
        .token_owner(&"d".repeat(64))
        .await
        .unwrap()
        .expect("a live token");
    assert_eq!(owner.token_id, token_id);
    assert_eq!(owner.user.id, ann.id);
    assert_eq!(owner.user.username, "ann");
    assert_eq!((owner.read_only, owner.expired_at), (false, None));
    assert!(tx.token_owner(&"e".repeat(64)).await.unwrap().is_none());
    let gone = tx.token_owner(&"f".repeat(64)).await.unwrap().unwrap();
    assert_eq!((gone.read_only, gone.expired_at), (true, Some(now - 1000)));
    let ci = tx.token_owner(&"a".repeat(64)).await.unwrap().unwrap();
    assert_eq!((ci.read_only, ci.expired_at), (true, None));
    // Listed with their terms, the expired one too until it is revoked.
    let listed: Vec<(String, Option<i64>, bool)> = tx
        .list_access_tokens(&ann.id)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.label.clone(), t.expires_ms, t.is_read_only()))
        .collect();
    assert_eq!(listed.len(), 3, "{listed:?}");
    assert!(listed.contains(&("laptop".to_owned(), None, false)));
    assert!(listed.contains(&("gone".to_owned(), Some(now - 1000), true)));
    tx.commit().await.unwrap();
}
on_every_backend!(access_tokens, an_access_token_names_its_user);
