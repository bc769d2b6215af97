//! The audit log: one event per change, filters, pages, and who sees which events.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{delete, minimal_policy, new_key, newest_event, patch, put};
use crate::helpers::*;
use crate::on_every_backend;

async fn every_change_leaves_one_audit_event(db: Db) {
    let app = spawn_app(db).await;
    let start = newest_event(&app).await["id"].as_i64().unwrap();
    app.create_app("shop").await;
    app.create_user("olga", None).await;
    let owner_token_event = newest_event(&app).await["id"].as_i64().unwrap();
    let admin = app.admin_token.clone();

    put(
        &app,
        "/api/v1/apps/shop/members/olga",
        &admin,
        json!({"role": "owner"}),
    )
    .await;
    let (key_id, _) = new_key(&app, "shop", &admin).await;
    expect_status(
        delete(&app, &format!("/api/v1/apps/shop/keys/{key_id}"), &admin).await,
        StatusCode::NO_CONTENT,
    )
    .await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &admin,
        json!({"rate": 2}),
    )
    .await;
    delete(&app, "/api/v1/policies/orders.create", &admin).await;
    delete(&app, "/api/v1/apps/shop/members/olga", &admin).await;

    let events = app.audit("").await;
    let newer: Vec<&Value> = events
        .iter()
        .filter(|e| e["id"].as_i64().unwrap() > owner_token_event)
        .collect();
    let summary: Vec<(&str, &str, &str)> = newer
        .iter()
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
                e["entity_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("member", "delete", "olga"),
            ("policy", "delete", "orders.create"),
            ("policy", "update", "orders.create"),
            ("policy", "create", "orders.create"),
            ("api_key", "revoke", key_id.as_str()),
            ("api_key", "create", key_id.as_str()),
            ("member", "create", "olga"),
        ],
        "newest first, one per change"
    );
    for e in &newer {
        assert_eq!(e["actor"], "admin");
        assert_eq!(e["app"], "shop");
        assert!(chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap()).is_ok());
        match e["action"].as_str().unwrap() {
            "create" => assert!(e["before"].is_null() && e["after"].is_object(), "{e}"),
            "delete" | "revoke" => assert!(e["before"].is_object() && e["after"].is_null(), "{e}"),
            _ => assert!(e["before"].is_object() && e["after"].is_object(), "{e}"),
        }
    }
    let update = newer[2];
    assert_eq!(update["before"]["rate"], json!(10.0));
    assert_eq!(update["after"]["rate"], json!(2.0));

    // The app itself, the user and their token were audited earlier, in order.
    let earlier: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| {
            let id = e["id"].as_i64().unwrap();
            id > start && id <= owner_token_event
        })
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        earlier,
        [
            ("access_token", "create"),
            ("user", "create"),
            ("app", "create")
        ]
    );
}
on_every_backend!(audit_trail, every_change_leaves_one_audit_event);

async fn the_audit_log_filters_by_policy_app_and_user(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_policy(minimal_policy("orders.refund", "shop"))
        .await;
    app.create_policy(minimal_policy("posts.publish", "blog"))
        .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"rate": 3}),
    )
    .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"rate": 4}),
    )
    .await;

    let by_policy = app.audit("?policy=orders.create").await;
    let summary: Vec<(&str, &str)> = by_policy
        .iter()
        .map(|e| (e["actor"].as_str().unwrap(), e["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [("olga", "update"), ("olga", "update"), ("admin", "create")]
    );
    assert!(
        by_policy
            .iter()
            .all(|e| e["entity_type"] == "policy" && e["entity_id"] == "orders.create")
    );
    assert_eq!(by_policy[0]["after"]["rate"], json!(4.0));
    assert_eq!(by_policy[0]["before"]["rate"], json!(3.0));

    let by_app = app.audit("?app=blog").await;
    let summary: Vec<(&str, &str)> = by_app
        .iter()
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["entity_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, [("policy", "posts.publish"), ("app", "blog")]);

    let by_user = app.audit("?user=olga").await;
    assert_eq!(by_user.len(), 2);
    assert!(by_user.iter().all(|e| e["actor"] == "olga"));

    // Filters combine.
    assert_eq!(app.audit("?app=blog&user=olga").await, Vec::<Value>::new());
    assert_eq!(
        app.audit("?app=shop&policy=orders.create&user=admin")
            .await
            .len(),
        1
    );
    // An empty filter is no filter.
    assert_eq!(app.audit("?app=&user=").await, app.audit("").await);
}
on_every_backend!(audit_filters, the_audit_log_filters_by_policy_app_and_user);

async fn the_audit_log_pages_fifty_at_a_time(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    for i in 0..55 {
        let r = patch(
            &app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            json!({"description": format!("edit {i}")}),
        )
        .await;
        expect_status(r, StatusCode::OK).await;
    }

    let page1 = app.audit("?policy=orders.create").await;
    let page1_again = app.audit("?policy=orders.create&page=1").await;
    let page2 = app.audit("?policy=orders.create&page=2").await;
    let page3 = app.audit("?policy=orders.create&page=3").await;
    assert_eq!(page1, page1_again);
    assert_eq!(page1.len(), 50);
    assert_eq!(page2.len(), 6, "55 updates and the create");
    assert!(page3.is_empty());

    let ids =
        |page: &[Value]| -> Vec<i64> { page.iter().map(|e| e["id"].as_i64().unwrap()).collect() };
    let (ids1, ids2) = (ids(&page1), ids(&page2));
    assert!(ids1.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(ids2.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(
        ids1.last().unwrap() > ids2.first().unwrap(),
        "disjoint, page 2 older"
    );
    assert_eq!(page1[0]["after"]["description"], "edit 54");
    assert_eq!(page2.last().unwrap()["action"], "create");

    // Paging without a filter holds every event once.
    let all1 = app.audit("").await;
    let all2 = app.audit("?page=2").await;
    assert_eq!(all1.len(), 50);
    assert!(!all2.is_empty());
    assert!(ids(&all1).iter().all(|id| !ids(&all2).contains(id)));
}
on_every_backend!(audit_pages, the_audit_log_pages_fifty_at_a_time);

async fn members_see_only_the_audit_events_of_their_applications(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_policy(minimal_policy("posts.publish", "blog"))
        .await;
    patch(
        &app,
        "/api/v1/policies/posts.publish",
        &app.admin_token,
        json!({"rate": 1}),
    )
    .await;

    let events = expect_status(app.get("/api/v1/audit", &viewer).await, StatusCode::OK).await;
    let events = events.as_array().unwrap();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e["app"] == "shop"), "{events:?}");
    assert!(events.iter().any(|e| e["entity_id"] == "orders.create"));

    // Asking for blog's events explicitly yields nothing either.
    for query in ["?app=blog", "?policy=posts.publish", "?user=admin&app=blog"] {
        let r = app.get(&format!("/api/v1/audit{query}"), &viewer).await;
        assert_eq!(expect_status(r, StatusCode::OK).await, json!([]), "{query}");
    }

    // A user of no application sees no event at all.
    let outsider = app.create_user("otto", None).await;
    let r = app.get("/api/v1/audit", &outsider).await;
    assert_eq!(expect_status(r, StatusCode::OK).await, json!([]));
}
on_every_backend!(
    audit_visibility,
    members_see_only_the_audit_events_of_their_applications
);

async fn a_bad_audit_page_is_400(db: Db) {
    let app = spawn_app(db).await;
    for query in ["?page=abc", "?page=-1", "?page=1.5"] {
        let r = app
            .get(&format!("/api/v1/audit{query}"), &app.admin_token)
            .await;
        let problem = expect_problem(r, StatusCode::BAD_REQUEST).await;
        assert!(
            problem["type"].as_str().unwrap().ends_with(":malformed"),
            "{query}"
        );
        // Without a valid token the answer is 401, whatever the query says.
        let r = app
            .get(&format!("/api/v1/audit{query}"), "rk_pat_wrong")
            .await;
        expect_problem(r, StatusCode::UNAUTHORIZED).await;
    }
}
on_every_backend!(bad_audit_page, a_bad_audit_page_is_400);
