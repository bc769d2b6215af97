//! Limits per caller in the console: the scope and the overrides on the policy form, and
//! the policy's own page (its limits and overrides, who is being limited, one caller's
//! bucket looked up, and reset by an owner).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{admin_reads, newest_event, shop_and_people};
use crate::helpers::*;
use crate::on_every_backend;

/// A policy as the admin reads it, without what every save changes.
async fn policy_body(app: &TestApp, name: &str) -> Value {
    let mut policy = admin_reads(app, &format!("/api/v1/policies/{name}")).await;
    let fields = policy.as_object_mut().unwrap();
    for changing in ["version", "updated_at"] {
        fields.remove(changing);
    }
    policy
}

async fn overrides_are_written_one_per_line(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/apps/shop/policies/new").await;
    assert_eq!(
        form.field("/apps/shop/policies", "scope").as_deref(),
        Some("global")
    );
    olga.submit(
        &form,
        "/apps/shop/policies",
        &[
            ("name", "orders"),
            ("rate", "1"),
            ("max_permits", "5"),
            ("scope", "per_key"),
            (
                "overrides",
                "acme max_permits=50 rate=600/minute\r\n\r\n\"  padded \" max_permits=2\r\n",
            ),
        ],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-created");
    let stored = policy_body(&app, "orders").await;
    assert_eq!(stored["scope"], "per_key");
    assert_eq!(
        stored["overrides"],
        json!([{"match": "acme", "max_permits": 50, "rate": 10.0},
               {"match": "  padded ", "max_permits": 2}])
    );

    // The edit form shows them as they were written, and saving it unchanged changes
    // nothing (not even a rate by rounding, nor a key's spaces).
    let form = olga.get("/policies/orders/edit").await;
    assert_eq!(
        form.field("/policies/orders/edit", "overrides").as_deref(),
        Some("acme max_permits=50 rate=10/second\n\"  padded \" max_permits=2")
    );
    olga.submit(&form, "/policies/orders/edit", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(policy_body(&app, "orders").await, stored);

    // Removing a line removes that override, audited with before and after.
    let form = olga.get("/policies/orders/edit").await;
    olga.submit(
        &form,
        "/policies/orders/edit",
        &[("overrides", "acme max_permits=60")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/orders").await["overrides"],
        json!([{"match": "acme", "max_permits": 60}])
    );
    let event = newest_event(&app).await;
    assert_eq!(event["actor"], "olga");
    assert_eq!(event["before"]["overrides"], stored["overrides"]);
    assert_eq!(event["after"]["overrides"][0]["max_permits"], 60);
    on_the_page_too(&mut olga).await;
}

/// The policy's page lists the overrides, and the app's page says whose the limit is.
async fn on_the_page_too(olga: &mut Browser) {
    let page = olga.get("/policies/orders/overview").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-override=\"acme\""), "{}", page.body);
    assert!(page.has("per key: each key a client names"));
    let app_page = olga.get("/apps/shop").await;
    assert_eq!(cell(&app_page, "orders", "rate"), "1 per second");
    assert_eq!(cell(&app_page, "orders", "algorithm"), "Token bucket");
    assert!(app_page.has("Token bucket</span>, each key</small>"));
    assert!(app_page.has("href=\"/policies/orders\""));
    let delete = olga.get("/policies/orders/delete").await;
    assert!(
        delete.has("with bursts of 5 for each key to shop"),
        "{}",
        delete.body
    );
}

on_every_backend!(overrides_per_line, overrides_are_written_one_per_line);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_override_line_is_named_and_nothing_is_saved() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_policy(
        json!({"name": "orders", "owner_app": "shop", "scope": "per_key",
                             "rate": 1, "max_permits": 5}),
    )
    .await;
    let before = policy_body(&app, "orders").await;
    let mut olga = app.sign_in("olga").await;
    let form = olga.get("/policies/orders/edit").await;
    let cases = [
        // Read by the form.
        ("acme burst=5", "line 1: has an unknown limit \"burst\""),
        ("acme rate=fast", "line 1: rate must be a number"),
        ("max_permits=3", "line 1: starts with no match"),
        ("\"open max_permits=1", "line 1: has a match in quotes"),
        // Checked by the same rules as the JSON API, named by line.
        (
            "a max_permits=1\n\nb max_permits=2\na max_permits=3",
            "line 4: match a has an earlier override in the list: one caller, one override",
        ),
        (
            "acme window_ms=1000",
            "line 1: window_ms is not used by token_bucket",
        ),
        ("acme", "line 1: sets no limit"),
        ("acme max_permits=0", "line 1: max_permits"),
    ];
    for (text, expected) in cases {
        let page = olga
            .submit(&form, "/policies/orders/edit", &[("overrides", text)])
            .await;
        page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            html_unescape(&page.body).contains(expected),
            "{text:?}: expected {expected:?}; body: {}",
            page.body
        );
        // What was typed is kept.
        assert_eq!(
            page.field("/policies/orders/edit", "overrides").as_deref(),
            Some(text)
        );
    }
    // Overrides on a global policy.
    let page = olga
        .submit(
            &form,
            "/policies/orders/edit",
            &[("scope", "global"), ("overrides", "acme max_permits=1")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"overrides-error\""), "{}", page.body);
    assert_eq!(policy_body(&app, "orders").await, before);
}

/// A per_key policy `logins` of shop (2 permits per key, barely refilling), with `mallory`
/// drained; returns the API key.
async fn mallory_locked_out(app: &TestApp) -> String {
    shop_and_people(app).await;
    let key = app.create_key("shop").await;
    app.create_policy(
        json!({"name": "logins", "owner_app": "shop", "scope": "per_key",
                             "rate": 0.001, "max_permits": 2}),
    )
    .await;
    for _ in 0..3 {
        app.post(
            "/v1/acquire",
            &key,
            json!({"resource": "logins", "key": "mallory"}),
        )
        .await;
    }
    key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_looks_up_a_key_and_resets_it() {
    let app = spawn_app(Db::Sqlite).await;
    mallory_locked_out(&app).await;
    let mut olga = app.sign_in("olga").await;

    let page = olga.get("/policies/logins/overview").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("Look up a key") && !page.has("id=\"bucket-state\""));

    let page = olga.get("/policies/logins/overview?key=mallory").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-fact=\"current\">0 of 2"), "{}", page.body);
    let page = olga.get("/policies/logins/overview?key=ann").await;
    assert!(
        page.has("data-fact=\"current\">2 of 2"),
        "a key never seen is full"
    );

    let page = olga.get("/policies/logins/overview?key=mallory").await;
    olga.submit(&page, "/policies/logins/reset", &[])
        .await
        .assert_redirect("/policies/logins/overview?key=mallory&done=bucket-reset");
    let page = olga
        .get("/policies/logins/overview?key=mallory&done=bucket-reset")
        .await;
    assert!(page.has("Bucket reset to full."));
    assert!(page.has("data-fact=\"current\">2 of 2"));
    let event = newest_event(&app).await;
    assert_eq!(
        (&event["actor"], &event["action"], &event["after"]),
        (
            &json!("olga"),
            &json!("reset_bucket"),
            &json!({"key": "mallory"})
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_owners_reset_and_only_with_the_sessions_token() {
    let app = spawn_app(Db::Sqlite).await;
    mallory_locked_out(&app).await;
    let events = app.audit_count().await;
    let drained = || async {
        admin_reads(&app, "/api/v1/policies/logins/state?key=mallory").await["current_permits"]
            == 0.0
    };

    // A viewer sees the state, without the button; a forged reset is refused.
    let mut vic = app.sign_in("vic").await;
    let page = vic.get("/policies/logins/overview?key=mallory").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-fact=\"current\">0 of 2"));
    assert!(!page.has("id=\"reset-form\""));
    vic.post_form("/policies/logins/reset", &[("key", "mallory")])
        .await
        .assert_status(StatusCode::FORBIDDEN);
    // The owner of another app may not even look.
    let mut otto = app.sign_in("otto").await;
    otto.get("/policies/logins/overview?key=mallory")
        .await
        .assert_status(StatusCode::FORBIDDEN);
    otto.post_form("/policies/logins/reset", &[("key", "mallory")])
        .await
        .assert_status(StatusCode::FORBIDDEN);
    // An owner's reset without the session's token.
    let mut olga = app.sign_in("olga").await;
    for csrf in [None, Some("rk_ses_made_up")] {
        olga.post_with_csrf("/policies/logins/reset", &[("key", "mallory")], csrf)
            .await
            .assert_status(StatusCode::FORBIDDEN);
    }
    assert!(drained().await, "no refused reset reached redis");
    assert_eq!(app.audit_count().await, events);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_names_no_caller_is_explained() {
    let app = spawn_app(Db::Sqlite).await;
    mallory_locked_out(&app).await;
    let mut olga = app.sign_in("olga").await;

    let too_long = "k".repeat(257);
    for bad in ["a%01b", too_long.as_str()] {
        let page = olga
            .get(&format!("/policies/logins/overview?key={bad}"))
            .await;
        page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
        assert!(page.has("id=\"bucket-error\""), "{bad}: {}", page.body);
        assert!(page.alert().unwrap().contains("The key"));
    }
    let page = olga
        .post_form("/policies/logins/reset", &[("key", "")])
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"bucket-error\""));
    // A global policy has one bucket: the page shows it, and has no key to look up.
    let page = olga.get("/policies/orders.create/overview").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-fact=\"current\">20 of 20"), "{}", page.body);
    assert!(!page.has("name=\"key\""));
    olga.post_form("/policies/orders.create/reset", &[("key", "x")])
        .await
        .assert_status(StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_names_who_is_being_limited() {
    let app = spawn_app(Db::Sqlite).await;
    let key = mallory_locked_out(&app).await;
    for caller in ["ann", "<b>bold</b>"] {
        app.post(
            "/v1/acquire",
            &key,
            json!({"resource": "logins", "key": caller}),
        )
        .await;
    }
    // Counts reach Redis with the next flush, every couple of seconds.
    let flushed = eventually(Duration::from_secs(15), || async {
        admin_reads(&app, "/api/v1/policies/logins/top?minutes=5").await["denied"]
            == json!([{"key": "mallory", "count": 1}])
    })
    .await;
    assert!(flushed, "the top callers never reached redis");
    let mut vic = app.sign_in("vic").await;
    let page = vic.get("/policies/logins/overview").await;
    page.assert_status(StatusCode::OK);
    assert!(
        page.has("<code>mallory</code></a> <span class=\"num\">1</span>"),
        "{}",
        page.body
    );
    for minutes in ["5", "60"] {
        assert!(page.has(&format!("data-minutes=\"{minutes}\"")));
    }
    // Each caller links to its bucket; a key is text, never markup.
    assert!(page.has("href=\"/policies/logins/overview?key=mallory\""));
    assert!(!page.has("<b>bold</b>"));
    assert!(html_unescape(&page.body).contains("<code><b>bold</b></code>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_app_policy_looks_up_an_application() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_policy(json!({"name": "per.app", "owner_app": "shop", "rate": 1,
                             "max_permits": 5, "scope": "per_app"}))
        .await;
    let mut admin = app.sign_in_as_admin().await;
    let page = admin.get("/policies/per.app").await;
    assert!(page.has("Look up an application"), "{}", page.body);
    assert!(!page.has("Look up a application"));
}
