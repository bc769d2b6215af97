//! Every console page is sent with a strict Content-Security-Policy (no inline script,
//! never framed), no MIME sniffing and a same-origin Referrer-Policy: signed in or not,
//! an error page or a page no route claims alike. The APIs' JSON needs none of them.

use reqwest::StatusCode;

use crate::helpers::*;

fn assert_guarded(page: &Page, what: &str) {
    let csp = page.header("content-security-policy").unwrap_or_default();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(
            csp.contains(directive),
            "{what}: {directive:?} not in {csp:?}"
        );
    }
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(page.header("x-frame-options"), Some("DENY"), "{what}");
    assert_eq!(
        page.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        page.header("referrer-policy"),
        Some("same-origin"),
        "{what}"
    );
}

#[tokio::test]
async fn every_console_page_forbids_inline_script_and_framing() {
    let app = spawn_app(Db::Sqlite).await;
    app.shop_with_policy("orders.create", 1.0, 5).await;
    let mut anonymous = app.browser();
    assert_guarded(&anonymous.get("/login").await, "/login");
    let mut admin = app.sign_in_as_admin().await;
    for path in [
        "/apps",
        "/apps/shop",
        "/policies/orders.create/edit",
        "/users",
        "/audit",
        "/account",
    ] {
        let page = admin.get(path).await;
        page.assert_status(StatusCode::OK);
        assert_guarded(&page, path);
        assert!(!page.body.contains("<script>"), "{path}: inline script");
    }
    let missing = admin.get("/no/such/page").await;
    missing.assert_status(StatusCode::NOT_FOUND);
    assert_guarded(&missing, "a page no route claims");
    let forbidden = admin.get("/apps/nope").await;
    assert_guarded(&forbidden, "an error page");
}
