//! Sessions: a new id at each sign-in, and nothing changes without one; a session ends
//! after its lifetime, and the next sign-in purges it.

use ratekeeper::control::SESSION_LIFETIME_MS;
use secrecy::ExposeSecret;
use sqlx::Connection;

use super::{changes_to_shop, shop_and_people, snapshot};
use crate::helpers::*;
use crate::on_every_backend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_gives_a_new_session_id_and_ends_the_old_one() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let first = app.sign_in("olga").await;
    let old = first.cookie("rk_session").unwrap().to_owned();

    // The browser still carries the old cookie (or one an attacker planted in it) when
    // the sign-in form is sent.
    let mut browser = app.browser();
    let form = browser.get("/login").await;
    browser.set_cookie("rk_session", &old);
    let page = browser
        .submit(
            &form,
            "/login",
            &[("username", "olga"), ("password", PASSWORD)],
        )
        .await;
    page.assert_redirect("/apps");
    let new = browser.cookie("rk_session").unwrap().to_owned();
    assert_ne!(new, old, "the session id is renewed at sign-in");
    assert!(browser.is_signed_in().await);

    let mut replay = app.browser();
    replay.set_cookie("rk_session", &old);
    assert!(!replay.is_signed_in().await, "the old session id is dead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_posted_without_signing_in_changes_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let before = snapshot(&app).await;
    let mut stranger = app.browser();

    for (path, fields) in changes_to_shop(&key_id) {
        let page = stranger
            .post_with_csrf(&path, &fields, Some("rk_ses_made_up"))
            .await;
        page.assert_redirect("/login?next=/apps");
        assert_eq!(snapshot(&app).await, before, "{path} changed something");
    }
}

/// (created_ms, expires_ms) of each stored session of `username`.
async fn sessions_of(sql: &mut sqlx::AnyConnection, username: &str) -> Vec<(i64, i64)> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT s.created_ms, s.expires_ms FROM sessions s JOIN users u ON u.id = s.user_id \
         WHERE u.username = '{username}'"
    )))
    .fetch_all(sql)
    .await
    .unwrap()
}

/// Moves the stored times of `username`'s sessions `ms` into the past, as if they had
/// been made that long ago: no waiting for twelve hours.
async fn age_sessions(sql: &mut sqlx::AnyConnection, username: &str, ms: i64) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "UPDATE sessions SET created_ms = created_ms - {ms}, expires_ms = expires_ms - {ms} \
         WHERE user_id = (SELECT id FROM users WHERE username = '{username}')"
    )))
    .execute(sql)
    .await
    .unwrap();
}

/// A console session lives 12 hours from sign-in: a minute before, it still works; a
/// minute after, the console treats the browser as signed out. The expired row stays in
/// the table until the next sign-in (anyone's) purges it.
async fn a_session_ends_after_twelve_hours_and_is_purged(db: Db) {
    assert_eq!(SESSION_LIFETIME_MS, 12 * 60 * 60 * 1000);
    let app = spawn_app(db).await;
    app.create_user("olga", None).await;
    app.create_user("vic", None).await;
    let mut sql = sqlx::AnyConnection::connect(app.settings.database_url.expose_secret())
        .await
        .unwrap();
    let mut olga = app.sign_in("olga").await;
    let stored = sessions_of(&mut sql, "olga").await;
    assert_eq!(stored.len(), 1, "{stored:?}");
    // 12 hours from sign-in (the two times are read from the clock a moment apart).
    let (created, expires) = stored[0];
    let lifetime = expires - created;
    assert!(
        lifetime <= SESSION_LIFETIME_MS && lifetime > SESSION_LIFETIME_MS - 60_000,
        "a lifetime of 12 hours: {lifetime} ms"
    );

    let minute = 60_000;
    age_sessions(&mut sql, "olga", SESSION_LIFETIME_MS - minute).await;
    assert!(olga.is_signed_in().await, "a minute before its end");
    age_sessions(&mut sql, "olga", 2 * minute).await;
    assert!(!olga.is_signed_in().await, "a minute after its end");
    assert_eq!(
        sessions_of(&mut sql, "olga").await.len(),
        1,
        "not purged yet"
    );

    // Someone else signs in: the expired session goes, the new one stays.
    let vic = app.sign_in("vic").await;
    assert!(sessions_of(&mut sql, "olga").await.is_empty(), "purged");
    assert_eq!(sessions_of(&mut sql, "vic").await.len(), 1);
    drop(vic);
}
on_every_backend!(
    session_lifetime,
    a_session_ends_after_twelve_hours_and_is_purged
);
