//! CSRF tokens: the login form's, signing out, and an owner's forms without the right one.

use reqwest::StatusCode;

use super::{assert_refused, changes_to_shop, refused_without_trace, shop_and_people, snapshot};
use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_without_the_login_forms_token_is_refused() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let credentials = [("username", "olga"), ("password", PASSWORD)];

    // The cookie is missing (a form posted from another site).
    let mut browser = app.browser();
    let form = browser.get("/login").await;
    browser.forget_cookie("rk_login_csrf");
    let page = browser.submit(&form, "/login", &credentials).await;
    assert_refused("no login cookie", &page, StatusCode::FORBIDDEN);
    assert!(page.set_cookie("rk_session").is_none());

    // The field is missing, or is not the cookie's.
    let mut browser = app.browser();
    browser.get("/login").await;
    let page = browser.post_raw("/login", &credentials).await;
    assert_refused("no csrf field", &page, StatusCode::FORBIDDEN);
    let page = browser
        .post_with_csrf("/login", &credentials, Some("rk_ses_made_up"))
        .await;
    assert_refused("wrong csrf field", &page, StatusCode::FORBIDDEN);
    assert!(!browser.is_signed_in().await);

    // The same browser, with the form as served, gets in.
    let mut browser = app.browser();
    browser
        .try_sign_in("olga", PASSWORD)
        .await
        .assert_redirect("/apps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_needs_the_sessions_csrf_token() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let mut browser = app.sign_in("olga").await;

    let page = browser.post_with_csrf("/logout", &[], None).await;
    assert_refused("logout without csrf", &page, StatusCode::FORBIDDEN);
    let page = browser
        .post_with_csrf("/logout", &[], Some("rk_ses_made_up"))
        .await;
    assert_refused("logout with a wrong csrf", &page, StatusCode::FORBIDDEN);
    assert!(browser.is_signed_in().await, "the session survives");

    browser
        .post_form("/logout", &[])
        .await
        .assert_redirect("/login");
    assert!(!browser.is_signed_in().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_form_without_the_right_csrf_token_changes_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    // A real token, but of another session (vic's).
    let mut vic = app.sign_in("vic").await;
    let vics_token = vic.session_csrf().await;
    let before = snapshot(&app).await;

    for (path, fields) in changes_to_shop(&key_id) {
        for csrf in [None, Some("rk_ses_made_up"), Some(vics_token.as_str())] {
            let page = olga.post_with_csrf(&path, &fields, csrf).await;
            let what = format!("{path} with csrf {csrf:?}");
            refused_without_trace(&app, &before, &what, page, StatusCode::FORBIDDEN).await;
        }
    }
}
