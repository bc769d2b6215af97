//! Sessions: a new id at each sign-in, and nothing changes without one.

use super::{changes_to_shop, shop_and_people, snapshot};
use crate::helpers::*;

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
