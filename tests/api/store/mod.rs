//! The SQL store, straight through `ratekeeper::store`, on every backend: the same calls
//! must give the same answers on SQLite, PostgreSQL and MariaDB.
//!
//! One file per area: `migrations`, `users`, `apps`, `memberships`, `keys_and_tokens`,
//! `policies`, `audit`, `transactions` and `webhooks`. The helpers below are shared by them.

use ratekeeper::domain::{
    Algorithm, AppSlug, FailureMode, MaxPermits, PolicyName, PolicySpec, Rate, Username,
};
use ratekeeper::store::{AppRecord, AuditEntry, AuditFilter, Author, Store, Tx, UserRecord};
use secrecy::SecretString;

use crate::helpers::*;

mod apps;
mod audit;
mod descriptors;
mod keys_and_tokens;
mod memberships;
mod migrations;
mod policies;
mod transactions;
mod users;
mod webhooks;

/// A store on a new, empty database of the backend, migrated twice (the second run must
/// find nothing to do).
async fn fresh_store(db: Db) -> Store {
    fresh_store_at(db).await.0
}

/// `fresh_store`, and its database's URL (for a connection of the test's own beside it).
async fn fresh_store_at(db: Db) -> (Store, String) {
    let url = fresh_database(db).await;
    let store = Store::connect(&SecretString::from(url.clone()))
        .await
        .expect("the store connects");
    store.migrate().await.expect("the migrations run");
    store.migrate().await.expect("migrating again is a no-op");
    (store, url)
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
        mode: ratekeeper::domain::Mode::Enforce,
        description: String::new(),
        scope: ratekeeper::domain::Scope::Global,
        overrides: Vec::new(),
        descriptors: Vec::new(),
        units: Default::default(),
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

fn entry<'a>(
    actor: &'a str,
    app: Option<&'a str>,
    entity_type: &'static str,
    entity_id: &'a str,
    action: &'static str,
) -> AuditEntry<'a> {
    AuditEntry {
        actor: Author {
            name: actor,
            source: "api",
            change_set: None,
        },
        app_slug: app,
        entity_type,
        entity_id,
        action,
        before: None,
        after: None,
    }
}
