//! The policy forms: creating, editing (stale forms, slow rates), deleting, odd names.

use reqwest::StatusCode;
use serde_json::json;

use super::{admin_reads, newest_event, shop_and_people, snapshot};
use crate::helpers::*;
use crate::on_every_backend;

async fn an_owner_creates_and_edits_a_policy(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    let page = olga.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("id=\"new-policy\""));
    let form = olga.get("/apps/shop/policies/new").await;
    form.assert_status(StatusCode::OK);
    olga.submit(
        &form,
        "/apps/shop/policies",
        &[
            ("name", "orders.create"),
            ("rate", "12"),
            ("rate_unit", "minute"),
            ("max_permits", "30"),
            ("description", "checkout"),
        ],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["rate"], 0.2);
    assert_eq!(policy["max_permits"], 30);
    assert_eq!(policy["allowed_apps"], json!(["shop"]));
    assert_eq!(policy["failure_mode"], "closed");
    assert_eq!(policy["enabled"], true);
    assert_eq!(policy["description"], "checkout");

    let page = olga.get("/apps/shop?done=policy-created").await;
    assert!(page.has("Policy created."));
    assert!(page.has("data-policy=\"orders.create\""));
    assert!(page.has("12 per minute"));

    let form = olga.get("/policies/orders.create/edit").await;
    form.assert_status(StatusCode::OK);
    assert_eq!(
        form.field("/policies/orders.create/edit", "rate")
            .as_deref(),
        Some("12")
    );
    olga.submit(
        &form,
        "/policies/orders.create/edit",
        &[("max_permits", "40"), ("failure_mode", "open")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["max_permits"], 40);
    assert_eq!(policy["failure_mode"], "open");
    assert_eq!(policy["rate"], 0.2, "an unchanged rate is kept exactly");
    assert_eq!(policy["version"], 2);
    let event = newest_event(&app).await;
    assert_eq!(
        (event["actor"].clone(), event["action"].clone()),
        (json!("olga"), json!("update"))
    );
}
on_every_backend!(policy_forms, an_owner_creates_and_edits_a_policy);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_policy_comes_back_with_errors_next_to_its_fields() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let before = snapshot(&app).await;

    let form = olga.get("/apps/shop/policies/new").await;
    let page = olga
        .submit(
            &form,
            "/apps/shop/policies",
            &[("name", "bad name!"), ("rate", "3"), ("max_permits", "0")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"max_permits-error\""));
    assert!(page.has("id=\"name-error\""));
    assert!(page.has("aria-invalid=\"true\""));
    // What was typed is kept.
    assert_eq!(
        page.field("/apps/shop/policies", "name").as_deref(),
        Some("bad name!")
    );
    assert_eq!(
        page.field("/apps/shop/policies", "max_permits").as_deref(),
        Some("0")
    );
    assert_eq!(
        page.field("/apps/shop/policies", "rate").as_deref(),
        Some("3")
    );
    assert_eq!(snapshot(&app).await, before, "nothing was saved");

    // A number that is not one is an error of its field, too.
    let page = olga
        .submit(
            &form,
            "/apps/shop/policies",
            &[
                ("name", "fine.name"),
                ("rate", "fast"),
                ("max_permits", "ten"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"rate-error\""));
    assert!(page.has("id=\"max_permits-error\""));

    // A name that is taken is an error of the name.
    let page = olga
        .submit(
            &form,
            "/apps/shop/policies",
            &[
                ("name", "orders.create"),
                ("rate", "1"),
                ("max_permits", "1"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"name-error\""));
    assert_eq!(snapshot(&app).await, before, "nothing was saved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_edit_form_does_not_overwrite_someone_elses_change() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/policies/orders.create/edit").await;
    assert_eq!(
        form.field("/policies/orders.create/edit", "version")
            .as_deref(),
        Some("1")
    );
    // Meanwhile the admin changes it through the API.
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/orders.create",
            &app.admin_token,
            Some(json!({"max_permits": 50})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;

    let page = olga
        .submit(
            &form,
            "/policies/orders.create/edit",
            &[("max_permits", "7")],
        )
        .await;
    page.assert_status(StatusCode::CONFLICT);
    assert!(page.has("changed the max permits"), "{}", page.body);
    assert!(page.has(">Theirs: 50</option>"), "{}", page.body);
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(
        (policy["max_permits"].clone(), policy["version"].clone()),
        (json!(50), json!(2))
    );

    // The form kept olga's value and now carries their version: her value is saved only
    // when she chooses it, with their change in view.
    assert_eq!(
        page.field("/policies/orders.create/edit", "max_permits")
            .as_deref(),
        Some("7")
    );
    olga.submit(
        &page,
        "/policies/orders.create/edit",
        &[("keep", "max_permits:yours")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(
        (policy["max_permits"].clone(), policy["version"].clone()),
        (json!(7), json!(3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_deletes_a_policy_after_confirming() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    let confirm = olga.get("/policies/orders.create/delete").await;
    confirm.assert_status(StatusCode::OK);
    assert!(confirm.has("they cannot be brought back"));
    // Looking at the confirmation deletes nothing.
    admin_reads(&app, "/api/v1/policies/orders.create").await;

    olga.submit(&confirm, "/policies/orders.create/delete", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-deleted");
    expect_problem(
        app.get("/api/v1/policies/orders.create", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let page = olga.get("/apps/shop?done=policy-deleted").await;
    assert!(!page.has("data-policy=\"orders.create\""));
    // Its pages are gone too.
    olga.get("/policies/orders.create/edit")
        .await
        .assert_status(StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_whose_name_has_a_slash_is_edited_and_deleted() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    app.create_policy(json!({
        "name": "team/search", "owner_app": "shop", "rate": 1, "max_permits": 2
    }))
    .await;
    let mut olga = app.sign_in("olga").await;

    let page = olga.get("/apps/shop").await;
    assert!(page.has("href=\"/policies/team/search/edit\""));
    let form = olga.get("/policies/team/search/edit").await;
    form.assert_status(StatusCode::OK);
    olga.submit(&form, "/policies/team/search/edit", &[("max_permits", "5")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/team/search").await["max_permits"],
        5
    );
    let confirm = olga.get("/policies/team/search/delete").await;
    olga.submit(&confirm, "/policies/team/search/delete", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-deleted");
    expect_problem(
        app.get("/api/v1/policies/team/search", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

/// A rate below one per hour is shown per day, a unit the form's select does not offer;
/// the browser then sends its first option ("per second").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_slow_policy_keeps_its_rate() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    app.create_policy(json!({
        "name": "reports.daily", "owner_app": "shop", "rate": 1.0 / 86_400.0, "max_permits": 1
    }))
    .await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/policies/reports.daily/edit").await;
    form.assert_status(StatusCode::OK);
    olga.submit(
        &form,
        "/policies/reports.daily/edit",
        &[("description", "one report a day")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/reports.daily").await;
    assert_eq!(policy["description"], "one report a day");
    let rate = policy["rate"].as_f64().unwrap();
    assert!(
        (rate * 86_400.0 - 1.0).abs() < 1e-6,
        "one per day became {rate} per second"
    );
}
