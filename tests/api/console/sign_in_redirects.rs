//! Where a sign-in sends the browser: only to pages of this site, whatever `next` says.

use reqwest::StatusCode;

use crate::helpers::*;

/// Where a sign-in with this `next` (percent-encoded) sends the browser.
async fn sign_in_sends_to(app: &TestApp, next: &str) -> Page {
    let mut browser = app.browser();
    let form = browser.get(&format!("/login?next={next}")).await;
    form.assert_status(StatusCode::OK);
    browser
        .submit(
            &form,
            "/login",
            &[("username", "olga"), ("password", PASSWORD)],
        )
        .await
}

/// A Location a browser resolves to this site: it drops tabs and newlines from a URL
/// first (so `/<TAB>/evil.example` is `//evil.example`, another host).
#[track_caller]
fn assert_same_site(next: &str, page: &Page) {
    page.assert_status(StatusCode::SEE_OTHER);
    let location: String = page
        .location()
        .unwrap()
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    assert!(
        location.starts_with('/') && !location.starts_with("//") && !location.contains('\\'),
        "next={next} sent the browser to {location:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_sends_only_to_pages_of_this_site() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    for next in [
        "%2F%2Fevil.example",
        "https%3A%2F%2Fevil.example",
        "%2F%5Cevil.example",
        "evil.example",
    ] {
        let page = sign_in_sends_to(&app, next).await;
        assert_same_site(next, &page);
        assert_eq!(page.location(), Some("/apps"), "next={next}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tab_in_next_cannot_send_the_browser_to_another_site() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    let next = "%2F%09%2Fevil.example";
    assert_same_site(next, &sign_in_sends_to(&app, next).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_break_in_next_does_not_break_sign_in() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    let next = "%2Fapps%0D%0ASet-Cookie%3A%20x%3Dy";
    let page = sign_in_sends_to(&app, next).await;
    assert_same_site(next, &page);
    assert!(page.set_cookie("rk_session").is_some());
}
