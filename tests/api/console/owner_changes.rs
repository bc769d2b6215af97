//! Every change an owner makes in the console, each applied and audited.

use reqwest::StatusCode;
use serde_json::json;

use super::{admin_reads, newest_event, policy_fields, shop_and_people};
use crate::helpers::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_makes_each_change_and_each_is_audited() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    // Each change: its answer, then what the JSON API and the audit log show.
    async fn audited(app: &TestApp, events_before: usize, entity_type: &str, action: &str) {
        assert_eq!(app.audit_count().await, events_before + 1);
        let event = newest_event(app).await;
        assert_eq!(event["actor"], "olga");
        assert_eq!(event["app"], "shop");
        assert_eq!(event["entity_type"], entity_type);
        assert_eq!(event["action"], action);
    }

    let events = app.audit_count().await;
    olga.post_form("/apps/shop/policies", &policy_fields("search", "5"))
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let search = admin_reads(&app, "/api/v1/policies/search").await;
    assert_eq!(
        (search["max_permits"].clone(), search["rate"].clone()),
        (json!(5), json!(5.0))
    );
    audited(&app, events, "policy", "create").await;

    let events = app.audit_count().await;
    let form = olga.get("/policies/orders.create/edit").await;
    form.assert_status(StatusCode::OK);
    olga.submit(
        &form,
        "/policies/orders.create/edit",
        &[("max_permits", "99")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["max_permits"], 99);
    assert_eq!(policy["rate"], 10.0, "the rate is kept as it was");
    assert_eq!(policy["version"], 2);
    audited(&app, events, "policy", "update").await;

    let events = app.audit_count().await;
    olga.post_form(
        "/apps/shop/members",
        &[("username", "ulla"), ("role", "viewer")],
    )
    .await
    .assert_redirect("/apps/shop?done=member-saved#members");
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    assert!(
        shop["members"]
            .as_array()
            .unwrap()
            .contains(&json!({"username": "ulla", "role": "viewer"}))
    );
    audited(&app, events, "member", "create").await;

    // Someone who does not exist cannot be added; the form says so.
    let page = olga
        .post_form(
            "/apps/shop/members",
            &[("username", "nobody"), ("role", "viewer")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.alert().unwrap().contains("no user named"));
    // What was typed is kept in the add-member form.
    assert!(page.has("id=\"member-username\" name=\"username\" value=\"nobody\""));

    let events = app.audit_count().await;
    olga.post_form("/apps/shop/members/ulla/remove", &[])
        .await
        .assert_redirect("/apps/shop?done=member-removed#members");
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    assert!(!shop["members"].to_string().contains("ulla"));
    audited(&app, events, "member", "delete").await;

    let events = app.audit_count().await;
    let page = olga.post_form("/apps/shop/keys", &[("label", "")]).await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"label-error\""));
    assert_eq!(app.audit_count().await, events);
    olga.post_form("/apps/shop/keys", &[("label", "batch")])
        .await
        .assert_redirect("/apps/shop#new-key");
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(shop["keys"].as_array().unwrap().len(), 2);
    audited(&app, events, "api_key", "create").await;

    let events = app.audit_count().await;
    olga.post_form(&format!("/apps/shop/keys/{key_id}/revoke"), &[])
        .await
        .assert_redirect("/apps/shop?done=key-revoked#keys");
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    let revoked = shop["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == key_id.as_str())
        .unwrap();
    assert!(revoked["revoked_at"].is_string());
    audited(&app, events, "api_key", "revoke").await;

    let events = app.audit_count().await;
    let confirm = olga.get("/policies/search/delete").await;
    confirm.assert_status(StatusCode::OK);
    olga.submit(&confirm, "/policies/search/delete", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-deleted");
    expect_problem(
        app.get("/api/v1/policies/search", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    audited(&app, events, "policy", "delete").await;
}
