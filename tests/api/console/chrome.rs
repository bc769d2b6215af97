//! What every page shares: error pages inside the navigation of whoever is signed in,
//! query strings refused in words, the viewer's read-only banner, times with their exact
//! value, and code names said as people say them.

use reqwest::StatusCode;

use super::shop_and_people;
use crate::helpers::*;

/// Whether the page shows the main navigation of `user` (their name and sign-out).
fn navigation_of(page: &Page, user: &str) -> bool {
    page.has("<nav aria-label=\"Main\">")
        && page.has(&format!("<a href=\"/account\">{user}</a>"))
        && page.has("id=\"logout\"")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_pages_keep_the_navigation_of_whoever_is_signed_in() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let mut vic = app.sign_in("vic").await;

    for (user, path, status) in [
        ("olga", "/apps/nosuch", StatusCode::NOT_FOUND),
        ("olga", "/no/such/page", StatusCode::NOT_FOUND),
        ("olga", "/audit?page=two", StatusCode::BAD_REQUEST),
        ("vic", "/apps/shop/policies/new", StatusCode::FORBIDDEN),
    ] {
        let browser = if user == "olga" { &mut olga } else { &mut vic };
        let page = browser.get(path).await;
        page.assert_status(status);
        assert!(navigation_of(&page, user), "GET {path}: {}", page.body);
        assert!(page.has(&format!("<p class=\"status\">{}</p>", status.as_u16())));
    }

    // A forged form (CSRF) and a stale edit are refused inside the navigation too.
    let page = vic
        .post_with_csrf("/policies/orders.create/delete", &[], Some("forged"))
        .await;
    page.assert_status(StatusCode::FORBIDDEN);
    assert!(navigation_of(&page, "vic"), "{}", page.body);

    // Nobody signed in (no session cookie, or one of no session): the sign-in page's
    // chrome, without the navigation, and a way to sign in.
    let mut stranger = app.browser();
    for cookie in [None, Some("ended-long-ago")] {
        if let Some(cookie) = cookie {
            stranger.set_cookie("rk_session", cookie);
        }
        let page = stranger.get("/no/such/page").await;
        page.assert_status(StatusCode::NOT_FOUND);
        assert!(!page.has("id=\"logout\""), "{}", page.body);
        assert!(!page.has("<nav aria-label=\"Main\">"), "{}", page.body);
        assert!(page.has(r#"<a href="/login">Sign in</a>"#), "{}", page.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_query_string_is_refused_in_words() {
    let app = spawn_app(Db::Sqlite).await;
    let mut admin = app.sign_in_as_admin().await;
    for query in ["page=two", "page=0", "page=99999999999999999999"] {
        let page = admin.get(&format!("/audit?{query}")).await;
        page.assert_status(StatusCode::BAD_REQUEST);
        assert!(
            page.has("page must be a whole number from 1"),
            "{query}: {}",
            page.body
        );
        assert!(!page.has("deserialize"), "{query}: {}", page.body);
    }
    admin
        .get("/audit?page=")
        .await
        .assert_status(StatusCode::OK);
    admin
        .get("/audit?page=2")
        .await
        .assert_status(StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_is_told_the_page_is_read_only_and_names_read_as_words() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let mut vic = app.sign_in("vic").await;
    let banner = "You can view this application; its owners can change it.";

    for path in ["/apps/shop", "/policies/orders.create/overview"] {
        let page = vic.get(path).await;
        page.assert_status(StatusCode::OK);
        assert!(page.has(banner), "viewer on {path}: {}", page.body);
        let page = olga.get(path).await;
        assert!(!page.has(banner), "owner on {path}");
    }

    let page = vic.get("/apps/shop").await;
    assert_eq!(cell(&page, "orders.create", "algorithm"), "Token bucket");
    assert!(
        page.has("title=\"Fail closed: refuse when Redis is unreachable\">fails closed</abbr>")
    );
    let page = vic.get("/policies/orders.create/overview").await;
    assert!(page.has("<dd>Token bucket</dd>"), "{}", page.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_times_carry_the_exact_time() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut admin = app.sign_in_as_admin().await;
    let page = admin.get("/users").await;
    page.assert_status(StatusCode::OK);
    let at = page
        .body
        .find("<time datetime=\"")
        .expect("a <time> element");
    let tag = &page.body[at..at + page.body[at..].find("</time>").unwrap()];
    assert!(tag.contains(" UTC\">"), "{tag}");
    assert!(tag.ends_with(">just now"), "{tag}");
}
