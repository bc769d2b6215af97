//! Envoy in the console: descriptor patterns on the policy form (one per line, errors by
//! line next to the text area, what was typed kept) and the "Behind a gateway" part of a
//! policy's page (for viewers too), its configuration escaped and copyable.

use reqwest::StatusCode;
use serde_json::json;

use super::admin_reads;
use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_are_written_one_per_line() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;
    let form = olga.get("/apps/shop/policies/new").await;
    assert_eq!(
        form.field("/apps/shop/policies", "descriptors").as_deref(),
        Some("")
    );
    olga.submit(
        &form,
        "/apps/shop/policies",
        &[
            ("name", "users"),
            ("rate", "1"),
            ("max_permits", "5"),
            ("scope", "per_key"),
            (
                "descriptors",
                "edge: database=users, user_id\r\n\r\n  path=/a=b ,user_id \r\n",
            ),
        ],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-created");
    let stored = admin_reads(&app, "/api/v1/policies/users").await;
    assert_eq!(
        stored["descriptors"],
        json!([{"domain": "edge", "entries": ["database=users", "user_id"]},
               {"entries": ["path=/a=b", "user_id"]}])
    );

    // The edit form shows them as the form writes them; saved unchanged, nothing changes.
    let form = olga.get("/policies/users/edit").await;
    assert_eq!(
        form.field("/policies/users/edit", "descriptors").as_deref(),
        Some("edge: database=users, user_id\npath=/a=b, user_id")
    );
    olga.submit(&form, "/policies/users/edit", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/users").await["version"],
        stored["version"],
        "an unchanged form saves nothing"
    );

    // Bad lines: each error by its line, what was typed kept, nothing saved.
    let cases = [
        (
            "user_id\n\nedge: bad key, user_id",
            "line 3: entries[0] key must be",
        ),
        ("database=users", "line 1: entries needs a bare entry"),
        ("user_id\nuser_id", "line 2: repeats descriptors[0]"),
        (
            "a=, user_id",
            "line 1: entries[0] value must be 1 to 256 bytes",
        ),
    ];
    for (text, expected) in cases {
        let page = olga
            .submit(&form, "/policies/users/edit", &[("descriptors", text)])
            .await;
        page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
        assert!(page.has("id=\"descriptors-error\""), "{}", page.body);
        assert!(
            html_unescape(&page.body).contains(expected),
            "{text:?}: expected {expected:?}; body: {}",
            page.body
        );
        assert_eq!(
            page.field("/policies/users/edit", "descriptors").as_deref(),
            Some(text)
        );
    }
    // Another policy's pattern is named on the form too.
    let form = olga.get("/apps/shop/policies/new").await;
    let page = olga
        .submit(
            &form,
            "/apps/shop/policies",
            &[
                ("name", "copy"),
                ("rate", "1"),
                ("max_permits", "5"),
                ("scope", "per_key"),
                ("descriptors", "edge: database=users, user_id"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        html_unescape(&page.body).contains("line 1: is already declared by the policy users"),
        "{}",
        page.body
    );
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/users").await["version"],
        stored["version"]
    );

    // An emptied text area means no patterns.
    let form = olga.get("/policies/users/edit").await;
    olga.submit(&form, "/policies/users/edit", &[("descriptors", "")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/users").await["descriptors"],
        json!([])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_how_a_gateway_asks() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("vera", Some(("shop", "viewer"))).await;
    app.create_policy(json!({
        "name": "users", "owner_app": "shop", "scope": "per_key", "rate": 1, "max_permits": 5,
        "descriptors": [{"domain": "edge", "entries": ["path=<b>x</b>", "user_id"]}]
    }))
    .await;
    app.create_policy(json!({"name": "login", "owner_app": "shop", "rate": 1, "max_permits": 5}))
        .await;
    let mut vera = app.sign_in("vera").await;

    let page = vera.get("/policies/users/overview").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("id=\"gateway\""), "{}", page.body);
    assert!(page.has("Behind a gateway"));
    let text = html_unescape(&page.body);
    assert!(
        text.contains("<code>generic_key=users, user_id=<the caller's key></code>"),
        "{}",
        page.body
    );
    assert!(text.contains("<code>edge: path=<b>x</b>, user_id</code>"));
    assert!(!page.has("<b>x</b>"), "escaped");
    let route = html_unescape(&pre(&page.body, "gateway-route"));
    let route: serde_json::Value = serde_norway::from_str(&route).unwrap();
    let actions = &route["rate_limits"][0]["actions"];
    assert_eq!(actions[0]["generic_key"]["descriptor_value"], "users");
    assert_eq!(actions[1]["request_headers"]["descriptor_key"], "user_id");
    let filter = html_unescape(&pre(&page.body, "gateway-filter"));
    let filter: serde_json::Value = serde_norway::from_str(&filter).unwrap();
    let config = &filter["http_filters"][0];
    assert_eq!(config["name"], "envoy.filters.http.ratelimit");
    assert_eq!(
        config["typed_config"]["domain"], "edge",
        "the pattern's domain"
    );
    let service = &config["typed_config"]["rate_limit_service"];
    assert_eq!(service["transport_api_version"], "V3");
    assert_eq!(
        service["grpc_service"]["initial_metadata"][0],
        json!({"key": "authorization", "value": "Bearer <API key of your application>"})
    );
    assert!(page.has("data-copy=\"#gateway-route\""));
    assert!(page.has("data-copy=\"#gateway-filter\""));

    // A global policy without patterns: its name alone names it.
    let page = vera.get("/policies/login/overview").await;
    assert!(page.has("<code>generic_key=login</code>"), "{}", page.body);
    let route = html_unescape(&pre(&page.body, "gateway-route"));
    assert!(!route.contains("request_headers"), "{route}");
    assert!(
        page.has("data-fact=\"patterns\"><span class=\"muted\">None."),
        "{}",
        page.body
    );
}

/// The text of `<pre id="{id}">`.
fn pre(body: &str, id: &str) -> String {
    let start = format!("<pre id=\"{id}\">");
    let from = body.find(&start).expect("the pre") + start.len();
    let to = from + body[from..].find("</pre>").expect("its end");
    body[from..to].to_owned()
}
