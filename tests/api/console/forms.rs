//! The policy form as people fill it in (README, "The web console"): numbers kept in the
//! unit they were typed in, every error at once, the read-only name kept, allowed
//! applications ticked in a list of every application.

use reqwest::StatusCode;
use serde_json::json;

use super::{admin_reads, shop_and_people, snapshot};
use crate::helpers::*;
use crate::on_every_backend;

const NEW: &str = "/apps/shop/policies";

/// The text of the error shown next to `field`, if any.
fn error_of(page: &Page, field: &str) -> Option<String> {
    let open = format!("id=\"{field}-error\">");
    let at = page.body.find(&open)? + open.len();
    let end = page.body[at..].find("</small>")? + at;
    Some(html_unescape(&page.body[at..end]))
}

async fn numbers_come_back_in_the_unit_they_were_typed_in(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/apps/shop/policies/new").await;
    let typed = [
        ("name", "reports.daily"),
        ("rate", "100"),
        ("rate_unit", "day"),
        ("max_permits", "100"),
    ];
    olga.submit(&form, NEW, &typed)
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, "/api/v1/policies/reports.daily").await;
    let per_day = policy["rate"].as_f64().unwrap() * 86_400.0;
    assert!((per_day - 100.0).abs() < 1e-9, "{policy}");
    assert_eq!(policy["rate_unit"], "day");

    let page = olga.get("/apps/shop").await;
    assert_eq!(cell(&page, "reports.daily", "rate"), "100 per day");
    let action = "/policies/reports.daily/edit";
    let form = olga.get(action).await;
    assert_eq!(form.field(action, "rate").as_deref(), Some("100"));
    assert_eq!(form.field(action, "rate_unit").as_deref(), Some("day"));

    // Saved again unchanged: nothing moves, not even by a rounding.
    olga.submit(&form, action, &[])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let again = admin_reads(&app, "/api/v1/policies/reports.daily").await;
    assert_eq!(again["rate"], policy["rate"]);
    assert_eq!(again["version"], 1);

    // A window in minutes.
    let form = olga.get("/apps/shop/policies/new").await;
    olga.submit(
        &form,
        NEW,
        &[
            ("name", "exports"),
            ("algorithm", "sliding_log"),
            ("rate", ""),
            ("window", "5"),
            ("window_unit", "minute"),
            ("max_permits", "10"),
        ],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, "/api/v1/policies/exports").await;
    assert_eq!(policy["window_ms"], 300_000);
    assert_eq!(policy["window_unit"], "minute");
    let page = olga.get("/apps/shop").await;
    assert_eq!(cell(&page, "exports", "rate"), "10 per 5 minutes");
    let action = "/policies/exports/edit";
    let form = olga.get(action).await;
    assert_eq!(form.field(action, "window").as_deref(), Some("5"));
    assert_eq!(form.field(action, "window_unit").as_deref(), Some("minute"));
}
on_every_backend!(units_kept, numbers_come_back_in_the_unit_they_were_typed_in);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_made_through_the_api_reads_in_its_best_unit() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_policy(json!({
        "name": "search", "owner_app": "shop", "algorithm": "fixed_window",
        "window_ms": 7_200_000, "max_permits": 3
    }))
    .await;
    let policy = admin_reads(&app, "/api/v1/policies/search").await;
    assert!(policy.get("window_unit").is_none(), "{policy}");
    let mut admin = app.sign_in_as_admin().await;
    let action = "/policies/search/edit";
    let form = admin.get(action).await;
    assert_eq!(form.field(action, "window").as_deref(), Some("2"));
    assert_eq!(form.field(action, "window_unit").as_deref(), Some("hour"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_of_the_form_is_shown_at_once() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let before = snapshot(&app).await;
    let form = olga.get("/apps/shop/policies/new").await;
    let csrf = form.csrf().unwrap();

    // A number the form cannot read, one too large, and an application that does not
    // exist: all three in one answer.
    let page = olga
        .post_raw(
            NEW,
            &[
                ("csrf", csrf.as_str()),
                ("name", "orders.list"),
                ("algorithm", "token_bucket"),
                ("rate", "ten"),
                ("rate_unit", "second"),
                ("max_permits", "12345678901234567890"),
                ("allowed_apps", "shop"),
                ("allowed_apps", "nosuch"),
                ("failure_mode", "closed"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        error_of(&page, "rate").as_deref(),
        Some("must be a number, such as 10 or 0.5")
    );
    assert_eq!(
        error_of(&page, "max_permits").as_deref(),
        Some("is too large (at most 1000000000)")
    );
    assert_eq!(
        error_of(&page, "allowed_apps").as_deref(),
        Some("no such application: nosuch")
    );
    // The unknown slug stays ticked, so nothing typed is lost.
    assert!(page.has("value=\"nosuch\" checked"), "{}", page.body);

    // Errors only the policy's rules find (a bad name) come with the unknown app too.
    let page = olga
        .post_raw(
            NEW,
            &[
                ("csrf", csrf.as_str()),
                ("name", "bad name!"),
                ("rate", "5"),
                ("rate_unit", "second"),
                ("max_permits", "5"),
                ("allowed_apps", "nosuch"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(error_of(&page, "name").is_some(), "{}", page.body);
    assert_eq!(
        error_of(&page, "allowed_apps").as_deref(),
        Some("no such application: nosuch")
    );

    // The rate's limits are said in the unit chosen.
    for (rate, unit, message) in [
        (
            "70000000",
            "minute",
            "is too large (at most 60000000 per minute)",
        ),
        (
            "0.001",
            "day",
            "must be at least 1 per 365 days (about 0.0028 per day)",
        ),
    ] {
        let page = olga
            .submit(
                &form,
                NEW,
                &[
                    ("name", "x"),
                    ("rate", rate),
                    ("rate_unit", unit),
                    ("max_permits", "1"),
                ],
            )
            .await;
        page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(error_of(&page, "rate").as_deref(), Some(message));
    }
    assert_eq!(snapshot(&app).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_only_name_is_kept_after_an_error_and_after_a_conflict() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let action = "/policies/orders.create/edit";

    let form = olga.get(action).await;
    let name_shown = |page: &Page| page.has("<input id=\"name\" value=\"orders.create\" readonly");
    assert!(name_shown(&form), "{}", form.body);
    let page = olga.submit(&form, action, &[("max_permits", "many")]).await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(name_shown(&page), "{}", page.body);

    // Someone else saves meanwhile: the stale form comes back with 409, name and all.
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/orders.create",
            &app.admin_token,
            Some(json!({"max_permits": 21})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;
    let page = olga.submit(&form, action, &[("max_permits", "22")]).await;
    page.assert_status(StatusCode::CONFLICT);
    assert!(name_shown(&page), "{}", page.body);
    assert!(page.has("Token bucket"), "the conflict is told in words");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_applications_are_ticked_in_a_list_of_every_application() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    // Olga is no member of `other`, and still may let it acquire: it is in the list.
    let form = olga.get("/apps/shop/policies/new").await;
    assert!(
        form.has("name=\"allowed_apps\" value=\"shop\" checked"),
        "{}",
        form.body
    );
    assert!(
        form.has("name=\"allowed_apps\" value=\"other\">"),
        "{}",
        form.body
    );
    assert!(
        form.has("src=\"/static/app-filter."),
        "the filter's script, by its hashed name"
    );
    let csrf = form.csrf().unwrap();
    let fields = [
        ("csrf", csrf.as_str()),
        ("name", "shared"),
        ("algorithm", "token_bucket"),
        ("failure_mode", "closed"),
        ("rate", "1"),
        ("rate_unit", "second"),
        ("max_permits", "1"),
        ("allowed_apps", "shop"),
        ("allowed_apps", "other"),
    ];
    olga.post_raw(NEW, &fields)
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, "/api/v1/policies/shared").await;
    assert_eq!(policy["allowed_apps"], json!(["shop", "other"]));
    let form = olga.get("/policies/shared/edit").await;
    assert!(
        form.has("name=\"allowed_apps\" value=\"other\" checked"),
        "{}",
        form.body
    );

    // None ticked: said so, nothing saved.
    let page = olga.post_raw(NEW, &fields[..fields.len() - 2]).await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        error_of(&page, "allowed_apps").as_deref(),
        Some("must name at least one application")
    );

    let script = olga.get("/static/app-filter.js").await;
    script.assert_status(StatusCode::OK);
    assert!(script.has("data-filter-for"));
}
