//! The SQL store, straight through `ratekeeper::store`, on every backend: the same calls
//! must give the same answers on SQLite, PostgreSQL and MariaDB.

use ratekeeper::domain::{
    Algorithm, AppSlug, FailureMode, MaxPermits, MemberRole, PolicyName, PolicySpec, Rate, Username,
};
use ratekeeper::store::{
    AppRecord, AuditEntry, AuditFilter, AuditRecord, Backend, KeyGrant, PolicyRecord, Store,
    StoreError, Tx, UserRecord, now_ms,
};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::on_every_backend;

// ---------------------------------------------------------------------------------------
// Helpers of this module
// ---------------------------------------------------------------------------------------

/// A store on a new, empty database of the backend, migrated twice (the second run must
/// find nothing to do).
async fn fresh_store(db: Db) -> Store {
    let url = fresh_database(db).await;
    let store = Store::connect(&SecretString::from(url))
        .await
        .expect("the store connects");
    store.migrate().await.expect("the migrations run");
    store.migrate().await.expect("migrating again is a no-op");
    store
}

async fn add_user(tx: &mut Tx, name: &str) -> UserRecord {
    tx.insert_user(&Username::parse(name).unwrap(), "$argon2id$fake", false)
        .await
        .expect("user inserted")
}

async fn add_app(tx: &mut Tx, slug: &str) -> AppRecord {
    tx.insert_app(&AppSlug::parse(slug).unwrap(), &slug.to_uppercase(), "")
        .await
        .expect("app inserted")
}

fn slugs(list: &[&str]) -> Vec<AppSlug> {
    list.iter().map(|s| AppSlug::parse(s).unwrap()).collect()
}

/// A token-bucket policy owned by `owner`, open to `allowed`.
fn spec(name: &str, owner: &str, rate: f64, max_permits: i64, allowed: &[&str]) -> PolicySpec {
    PolicySpec {
        name: PolicyName::parse(name).unwrap(),
        owner_app: AppSlug::parse(owner).unwrap(),
        algorithm: Algorithm::TokenBucket,
        rate: Some(Rate::parse_field("rate", rate).unwrap()),
        max_permits: MaxPermits::parse_field("max_permits", max_permits).unwrap(),
        window_ms: None,
        lease_ttl_ms: None,
        allowed_apps: slugs(allowed),
        failure_mode: FailureMode::Closed,
        enabled: true,
        description: String::new(),
    }
}

/// An audit filter showing up to 50 events.
fn filter() -> AuditFilter {
    AuditFilter {
        page: 1,
        per_page: 50,
        ..AuditFilter::default()
    }
}

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

fn entry<'a>(
    actor: &'a str,
    app: Option<&'a str>,
    entity_type: &'static str,
    entity_id: &'a str,
    action: &'static str,
) -> AuditEntry<'a> {
    AuditEntry {
        actor,
        app_slug: app,
        entity_type,
        entity_id,
        action,
        before: None,
        after: None,
    }
}

// ---------------------------------------------------------------------------------------
// Connecting and migrating
// ---------------------------------------------------------------------------------------

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
    assert!(tx.live_key_grants().await.unwrap().is_empty());
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

// ---------------------------------------------------------------------------------------
// Users, applications, memberships
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// API keys and access tokens
// ---------------------------------------------------------------------------------------

async fn api_keys_are_listed_granted_revoked_and_touched(db: Db) {
    let store = fresh_store(db).await;
    let mut tx = store.begin().await.unwrap();
    let shop = add_app(&mut tx, "shop").await;
    let blog = add_app(&mut tx, "blog").await;
    let k1 = tx
        .insert_api_key(&shop.id, "checkout", &"a".repeat(64), "ann")
        .await
        .unwrap();
    let k2 = tx
        .insert_api_key(&shop.id, "rotation", &"b".repeat(64), "ann")
        .await
        .unwrap();
    let k3 = tx
        .insert_api_key(&blog.id, "cms", &"c".repeat(64), "bob")
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
    let mut grants = tx.live_key_grants().await.unwrap();
    grants.sort_by(|a, b| a.key_hash.cmp(&b.key_hash));
    let grant = |hash: char, id: &str, app: &str| KeyGrant {
        key_hash: hash.to_string().repeat(64),
        key_id: id.to_owned(),
        app_slug: app.to_owned(),
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
    let live: Vec<String> = tx
        .live_key_grants()
        .await
        .unwrap()
        .into_iter()
        .map(|g| g.key_id)
        .collect();
    assert!(!live.contains(&k1.id), "revoked keys grant nothing");
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
        .insert_api_key(&blog.id, "copy", &"a".repeat(64), "bob")
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
        .insert_access_token(&ann.id, "laptop", &"d".repeat(64))
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
    assert!(tx.token_owner(&"e".repeat(64)).await.unwrap().is_none());
    tx.commit().await.unwrap();
}
on_every_backend!(access_tokens, an_access_token_names_its_user);

// ---------------------------------------------------------------------------------------
// Policies
// ---------------------------------------------------------------------------------------

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
    assert_eq!(tx.list_policies(None).await.unwrap(), [inserted, plain]);
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

// ---------------------------------------------------------------------------------------
// Audit events
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// Transactions
// ---------------------------------------------------------------------------------------

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
        tx.insert_api_key(&kept.id, "ghost", &"f".repeat(64), "ann")
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
    assert!(tx.live_key_grants().await.unwrap().is_empty());
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

// ---------------------------------------------------------------------------------------
// Transactions side by side (as two requests on two instances would run them)
// ---------------------------------------------------------------------------------------

/// A transaction that has read may still write after another one committed meanwhile.
async fn interleaved_transactions_both_write(db: Db) {
    let store = fresh_store(db).await;
    let mut first = store.begin().await.unwrap();
    assert_eq!(first.count_users().await.unwrap(), 0);

    // A second transaction starts while the first is open (on SQLite it waits for the
    // first's write lock; elsewhere it runs beside it).
    let other = store.clone();
    let second = tokio::spawn(async move {
        let mut second = other.begin().await.unwrap();
        add_user(&mut second, "bob").await;
        second.commit().await.unwrap();
    });

    first
        .insert_user(&Username::parse("ann").unwrap(), "x", false)
        .await
        .expect("the first transaction writes");
    first.commit().await.unwrap();
    second.await.expect("the second transaction commits too");
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.count_users().await.unwrap(), 2);
}

/// A change reads its policy locked: a second change of the same policy waits for the
/// first to commit and then starts from the version the first made, so no change is lost
/// and no version check fails for a client that sent none.
async fn a_locked_read_waits_for_the_change_before_it(db: Db) {
    let store = fresh_store(db).await;
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
