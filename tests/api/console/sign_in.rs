//! Signing in: the session cookie, wrong passwords, and the limit on attempts.

use reqwest::StatusCode;

use super::assert_refused;
use crate::helpers::*;
use crate::on_every_backend;

/// The attributes of a `Set-Cookie` header, lowercased, without the name=value pair.
fn cookie_attributes(set_cookie: &str) -> Vec<String> {
    set_cookie
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect()
}

async fn a_user_signs_in_and_comes_back_to_the_page_asked_for(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut browser = app.browser();

    // Not signed in: off to the sign-in page, which knows where to come back to.
    browser
        .get("/apps")
        .await
        .assert_redirect("/login?next=/apps");
    browser
        .get("/audit?app=shop")
        .await
        .assert_redirect("/login?next=/audit%3Fapp%3Dshop");

    let form = browser.get("/login?next=%2Faudit%3Fapp%3Dshop").await;
    form.assert_status(StatusCode::OK);
    assert_eq!(
        form.field("/login", "next").as_deref(),
        Some("/audit?app=shop")
    );
    assert!(browser.cookie("rk_login_csrf").is_some());
    let signed_in = browser
        .submit(
            &form,
            "/login",
            &[("username", "olga"), ("password", PASSWORD)],
        )
        .await;
    signed_in.assert_redirect("/audit?app=shop");

    // The session cookie: no script reads it, no other site's POST carries it, and over
    // plain HTTP it is not marked Secure (the browser would drop it).
    let cookie = signed_in
        .set_cookie("rk_session")
        .expect("a session cookie");
    let attributes = cookie_attributes(&cookie);
    assert!(attributes.contains(&"httponly".to_owned()), "{cookie}");
    assert!(attributes.contains(&"samesite=lax".to_owned()), "{cookie}");
    assert!(attributes.contains(&"path=/".to_owned()), "{cookie}");
    assert!(!attributes.contains(&"secure".to_owned()), "{cookie}");
    // The login form's own token is spent.
    assert!(browser.cookie("rk_login_csrf").is_none());

    let apps = browser.get("/apps").await;
    apps.assert_status(StatusCode::OK);
    assert!(apps.has("href=\"/apps/shop\""));
    assert!(apps.has("id=\"logout\""));

    // Signed in, the sign-in page sends the user on.
    browser.get("/login").await.assert_redirect("/apps");

    // Signing out ends the session; the cookie no longer opens anything.
    let cookie = browser.cookie("rk_session").unwrap().to_owned();
    let csrf = browser.session_csrf().await;
    let out = browser.post_with_csrf("/logout", &[], Some(&csrf)).await;
    out.assert_redirect("/login");
    assert!(
        cookie_attributes(&out.set_cookie("rk_session").unwrap()).contains(&"max-age=0".to_owned())
    );
    let mut replay = app.browser();
    replay.set_cookie("rk_session", &cookie);
    replay
        .get("/apps")
        .await
        .assert_redirect("/login?next=/apps");
}
on_every_backend!(
    sign_in,
    a_user_signs_in_and_comes_back_to_the_page_asked_for
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_tls_proxy_the_session_cookie_is_secure() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let mut browser = app.browser();
    browser.behind_tls = true;

    let form = browser.get("/login").await;
    let login_csrf = form.set_cookie("rk_login_csrf").unwrap();
    assert!(cookie_attributes(&login_csrf).contains(&"secure".to_owned()));
    let signed_in = browser.try_sign_in("olga", PASSWORD).await;
    signed_in.assert_redirect("/apps");
    let cookie = signed_in.set_cookie("rk_session").unwrap();
    let attributes = cookie_attributes(&cookie);
    assert!(attributes.contains(&"secure".to_owned()), "{cookie}");
    assert!(attributes.contains(&"httponly".to_owned()), "{cookie}");
    assert!(attributes.contains(&"samesite=lax".to_owned()), "{cookie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_and_an_unknown_user_look_the_same() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    let mut browser = app.browser();
    let wrong_password = browser.try_sign_in("olga", "not her password").await;
    let mut browser = app.browser();
    let unknown_user = browser.try_sign_in("nobody", PASSWORD).await;

    for page in [&wrong_password, &unknown_user] {
        page.assert_status(StatusCode::UNAUTHORIZED);
        assert!(page.set_cookie("rk_session").is_none());
    }
    let message = wrong_password.alert().expect("a message in role=alert");
    assert_eq!(unknown_user.alert().as_deref(), Some(message.as_str()));
    assert!(message.contains("wrong password"), "{message}");
    // The username typed is kept; the password never comes back.
    assert_eq!(
        wrong_password.field("/login", "username").as_deref(),
        Some("olga")
    );
    assert!(!wrong_password.has("not her password"));
    assert!(!browser.is_signed_in().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_attempts_are_limited_per_username() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    app.create_user("vic", None).await;

    let mut guesser = app.browser();
    for attempt in 1..=10 {
        let page = guesser
            .try_sign_in("olga", &format!("guess {attempt}"))
            .await;
        assert_refused(&format!("guess {attempt}"), &page, StatusCode::UNAUTHORIZED);
    }

    // The eleventh attempt is refused before the password is even looked at.
    let mut olga = app.browser();
    let page = olga.try_sign_in("olga", PASSWORD).await;
    assert_refused("eleventh attempt", &page, StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = page
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "Retry-After {retry_after}");
    let message = page.alert().expect("a message");
    assert!(message.contains("Too many sign-in attempts"), "{message}");
    assert!(page.set_cookie("rk_session").is_none());

    // Another user at the same address is not locked out (its limit is 30).
    let mut vic = app.browser();
    vic.try_sign_in("vic", PASSWORD)
        .await
        .assert_redirect("/apps");
}

#[tokio::test]
async fn a_guesser_elsewhere_cannot_lock_the_owner_out() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let mut guesser = app.browser_from([127, 0, 0, 2].into());
    for attempt in 1..=10 {
        let page = guesser
            .try_sign_in("olga", &format!("guess {attempt}"))
            .await;
        assert_refused(&format!("guess {attempt}"), &page, StatusCode::UNAUTHORIZED);
    }
    // The guesser is slowed down, at their address.
    let page = guesser.try_sign_in("olga", "guess 11").await;
    assert_refused("eleventh guess", &page, StatusCode::TOO_MANY_REQUESTS);
    // Olga, at her own address, signs in: a known username is no lockout switch.
    let mut olga = app.browser_from([127, 0, 0, 3].into());
    olga.try_sign_in("olga", PASSWORD)
        .await
        .assert_redirect("/apps");
}

#[tokio::test]
async fn every_instance_counts_the_same_sign_in_attempts() {
    let first = spawn_app(Db::Sqlite).await;
    first.create_user("olga", None).await;
    // Another instance on the same database and Redis.
    let second = spawn_app_with(first.settings.clone()).await;
    let mut guesser = first.browser();
    for attempt in 1..=10 {
        let page = guesser
            .try_sign_in("olga", &format!("guess {attempt}"))
            .await;
        assert_refused(&format!("guess {attempt}"), &page, StatusCode::UNAUTHORIZED);
    }
    // The limit is Redis', not each process's: the other instance refuses the eleventh.
    let mut elsewhere = second.browser();
    let page = elsewhere.try_sign_in("olga", "guess 11").await;
    assert_refused("eleventh guess", &page, StatusCode::TOO_MANY_REQUESTS);
}
