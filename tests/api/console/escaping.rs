//! Names and descriptions are shown escaped on every page.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_descriptions_are_shown_escaped() {
    let app = spawn_app(Db::Sqlite).await;
    let hostile = "<script>alert(1)</script> & co";
    let r = app
        .post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": "co", "name": hostile, "description": "\"quoted\" <i>"}),
        )
        .await;
    expect_status(r, StatusCode::CREATED).await;
    app.create_policy(json!({
        "name": "co.search", "owner_app": "co", "rate": 1, "max_permits": 2,
        "description": "<b>bold</b> & \"quoted\""
    }))
    .await;
    let mut admin = app.sign_in_as_admin().await;

    let escaped = |page: &Page, raw: &str| {
        let lt = raw
            .replace('&', "&#38;")
            .replace('<', "&#60;")
            .replace('>', "&#62;");
        let named = raw
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(!page.has(raw), "{raw:?} is on the page raw");
        assert!(
            page.has(&lt) || page.has(&named),
            "{raw:?} is not on the page escaped: {}",
            page.body
        );
    };
    for path in ["/apps", "/apps/co", "/account"] {
        let page = admin.get(path).await;
        page.assert_status(StatusCode::OK);
        escaped(&page, hostile);
    }
    let page = admin.get("/apps/co").await;
    assert!(!page.has("<i>"));

    let form = admin.get("/policies/co.search/edit").await;
    form.assert_status(StatusCode::OK);
    escaped(&form, "<b>bold</b>");
    // What the browser shows (and sends back) is the text as typed.
    assert_eq!(
        form.field("/policies/co.search/edit", "description")
            .as_deref(),
        Some("<b>bold</b> & \"quoted\"")
    );

    let audit = admin.get("/audit").await;
    assert!(!audit.has("<b>bold</b>"));
    assert!(!audit.has("<script>alert(1)</script>"));
}
