//! The console's policy form for every algorithm, with and without its script.

use reqwest::StatusCode;
use serde_json::json;

use std::collections::BTreeSet;

use super::{
    ALGORITHMS, admin_reads, cell, field_names, is_lease_id, own_parameter, policy_fields,
    policy_path, shop_with_key,
};
use crate::helpers::*;

/// The fields of a policy made in the console: also the unit its parameter was typed in.
fn console_fields(algorithm: &str) -> BTreeSet<String> {
    let mut fields = policy_fields(algorithm);
    let unit = match own_parameter(algorithm) {
        "rate" => "rate_unit",
        "window_ms" => "window_unit",
        _ => "lease_ttl_unit",
    };
    fields.insert(unit.to_owned());
    fields
}

/// What a browser running the console's script sends for a form: the inputs of the
/// groups the chosen algorithm does not use are disabled, and so not sent.
fn as_the_script_sends(fields: Vec<(String, String)>) -> Vec<(String, String)> {
    let algorithm = fields
        .iter()
        .find(|(name, _)| name == "algorithm")
        .map(|(_, value)| value.clone())
        .expect("the form has an algorithm");
    let groups: [(&[&str], &[&str]); 3] = [
        (&["rate", "rate_unit"], &["token_bucket", "gcra"]),
        (
            &["window", "window_unit"],
            &["fixed_window", "sliding_log", "sliding_window"],
        ),
        (&["lease_ttl", "lease_ttl_unit"], &["concurrency"]),
    ];
    fields
        .into_iter()
        .filter(|(name, _)| {
            groups.iter().all(|(inputs, users)| {
                !inputs.contains(&name.as_str()) || users.contains(&algorithm.as_str())
            })
        })
        .collect()
}

/// The form of `page` posting to `action` with `changes` typed in, as the script sends it.
fn filled_in(page: &Page, action: &str, changes: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut fields = page.form(action);
    for (name, value) in changes {
        match fields.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = (*value).to_owned(),
            None => fields.push(((*name).to_owned(), (*value).to_owned())),
        }
    }
    as_the_script_sends(fields)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_makes_a_fixed_window_then_a_concurrency_limit_in_the_console() {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/apps/shop/policies/new").await;
    form.assert_status(StatusCode::OK);
    for algorithm in ALGORITHMS {
        assert!(
            form.has(&format!("<option value=\"{algorithm}\"")),
            "{algorithm} is offered"
        );
    }
    assert!(form.has("data-algorithms=\"token_bucket gcra\""));
    assert!(form.has("data-algorithms=\"fixed_window sliding_log sliding_window\""));
    assert!(form.has("data-algorithms=\"concurrency\""));
    assert_eq!(
        form.field("/apps/shop/policies", "rate").as_deref(),
        Some("")
    );

    // Typed in a browser without the script: the rate is left empty, so not taken.
    olga.submit(
        &form,
        "/apps/shop/policies",
        &[
            ("name", "exports"),
            ("algorithm", "fixed_window"),
            ("window", "1"),
            ("window_unit", "minute"),
            ("max_permits", "5"),
        ],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, &policy_path("exports")).await;
    assert_eq!(field_names(&policy), console_fields("fixed_window"));
    assert_eq!(policy["algorithm"], "fixed_window");
    assert_eq!(policy["window_ms"], 60_000);
    assert_eq!(policy["max_permits"], 5);

    let page = olga.get("/apps/shop").await;
    assert_eq!(cell(&page, "exports", "rate"), "5 per minute");
    assert_eq!(cell(&page, "exports", "algorithm"), "Fixed window");
    assert_eq!(cell(&page, "exports", "current"), "5");

    // Edited to a concurrency limit, with the script hiding the window.
    let form = olga.get("/policies/exports/edit").await;
    form.assert_status(StatusCode::OK);
    let action = "/policies/exports/edit";
    assert_eq!(
        form.field(action, "algorithm").as_deref(),
        Some("fixed_window")
    );
    // The window comes back in the unit it was typed in.
    assert_eq!(form.field(action, "window").as_deref(), Some("1"));
    assert_eq!(form.field(action, "window_unit").as_deref(), Some("minute"));
    assert_eq!(form.field(action, "rate").as_deref(), Some(""));
    let fields = filled_in(
        &form,
        action,
        &[
            ("algorithm", "concurrency"),
            ("lease_ttl", "30"),
            ("lease_ttl_unit", "second"),
        ],
    );
    assert!(fields.iter().all(|(name, _)| name != "window"));
    olga.post_raw(action, &fields)
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, &policy_path("exports")).await;
    assert_eq!(field_names(&policy), console_fields("concurrency"));
    assert_eq!(policy["lease_ttl_ms"], 30_000);
    assert_eq!(policy["max_permits"], 5);
    assert_eq!(policy["version"], 2);

    let page = olga.get("/apps/shop").await;
    assert_eq!(
        cell(&page, "exports", "rate"),
        "5 at once (leases up to 30 seconds)"
    );
    assert_eq!(cell(&page, "exports", "algorithm"), "Concurrency (leases)");
    // In force at once: the grants are leases now.
    let body = expect_status(app.acquire(&key, "exports", 1).await, StatusCode::OK).await;
    assert!(is_lease_id(body["lease_id"].as_str().unwrap()), "{body}");
    assert_eq!(body["remaining"], 4);

    // The edit form shows the lease lifetime, and no window.
    let form = olga.get("/policies/exports/edit").await;
    assert_eq!(
        form.field(action, "algorithm").as_deref(),
        Some("concurrency")
    );
    assert_eq!(form.field(action, "lease_ttl").as_deref(), Some("30"));
    assert_eq!(
        form.field(action, "lease_ttl_unit").as_deref(),
        Some("second")
    );
    assert_eq!(form.field(action, "window").as_deref(), Some(""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_script_a_window_left_in_the_form_is_shown_next_to_its_field() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_policy(json!({
        "name": "exports", "owner_app": "shop", "algorithm": "fixed_window",
        "window_ms": 60_000, "max_permits": 5
    }))
    .await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;
    let before = admin_reads(&app, &policy_path("exports")).await;
    let events = app.audit_count().await;

    let action = "/policies/exports/edit";
    let form = olga.get(action).await;
    let page = olga
        .submit(
            &form,
            action,
            &[
                ("algorithm", "concurrency"),
                ("lease_ttl", "30000"),
                ("lease_ttl_unit", "ms"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"window-error\""), "{}", page.body);
    assert!(page.has("is not used by concurrency"));
    assert_eq!(
        page.field(action, "algorithm").as_deref(),
        Some("concurrency")
    );
    assert_eq!(page.field(action, "lease_ttl").as_deref(), Some("30000"));
    assert_eq!(admin_reads(&app, &policy_path("exports")).await, before);
    assert_eq!(app.audit_count().await, events);

    // Emptied, it is not sent, and the change goes through.
    olga.submit(&page, action, &[("window", "")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, &policy_path("exports")).await;
    assert_eq!(policy["algorithm"], "concurrency");
    assert_eq!(policy["lease_ttl_ms"], 30_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_on_a_sliding_log_comes_back_next_to_its_field() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;
    let events = app.audit_count().await;

    let action = "/apps/shop/policies";
    let form = olga.get("/apps/shop/policies/new").await;
    let page = olga
        .submit(
            &form,
            action,
            &[
                ("name", "search"),
                ("algorithm", "sliding_log"),
                ("rate", "5"),
                ("window", "1000"),
                ("window_unit", "ms"),
                ("max_permits", "10"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"rate-error\""), "{}", page.body);
    assert!(page.has("is not used by sliding_log"));
    assert!(page.has("aria-invalid=\"true\""));
    // Everything typed is kept.
    assert_eq!(page.field(action, "rate").as_deref(), Some("5"));
    assert_eq!(
        page.field(action, "algorithm").as_deref(),
        Some("sliding_log")
    );
    assert_eq!(page.field(action, "window").as_deref(), Some("1000"));
    assert_eq!(page.field(action, "name").as_deref(), Some("search"));
    assert_eq!(
        admin_reads(&app, "/api/v1/policies?app=shop").await,
        json!([])
    );
    assert_eq!(app.audit_count().await, events);

    // Without its window, the window is what is missing.
    let page = olga
        .submit(&page, action, &[("rate", ""), ("window", "")])
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"window-error\""), "{}", page.body);
    assert!(page.has("is required for sliding_log"));
    assert!(!page.has("id=\"rate-error\""));

    olga.submit(&page, action, &[("window", "1000")])
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, &policy_path("search")).await;
    assert_eq!(field_names(&policy), console_fields("sliding_log"));
    assert_eq!(policy["window_ms"], 1000);
    let page = olga.get("/apps/shop").await;
    // In the unit it was typed in.
    assert_eq!(cell(&page, "search", "rate"), "10 per 1000 ms");
}
