//! Policy files in the console (README "Policy files", "The web console"): an
//! application's *Download as file* is the API's export; a pasted file shows its plan and
//! changes nothing until *Apply these changes*, which applies exactly that plan as the
//! signed-in user; a file touching an application the user may not change, an invalid
//! file and a plan gone stale are each shown on the page, and change nothing (read back
//! as the admin, with the number of audit events).

use reqwest::StatusCode;
use serde_json::json;

use super::{admin_reads, newest_event};
use crate::helpers::*;
use crate::on_every_backend;

/// shop (olga owns it, vic views it) with `orders.create`, `search` and `old`, all 10/s
/// with at most 20; billing (bill owns it) with `invoices.list`.
async fn shop_and_billing(app: &TestApp) {
    app.create_app("shop").await;
    app.create_app("billing").await;
    for (name, owner) in [
        ("orders.create", "shop"),
        ("search", "shop"),
        ("old", "shop"),
        ("invoices.list", "billing"),
    ] {
        app.create_policy(json!({"name": name, "owner_app": owner, "rate": 10, "max_permits": 20}))
            .await;
    }
    app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_user("vic", Some(("shop", "viewer"))).await;
    app.create_user("bill", Some(("billing", "owner"))).await;
}

/// shop's file: `orders.create` as it is, `search` at 120/min, a new `pings`; with prune,
/// `old` (not listed) is deleted.
const SHOP_FILE: &str = "app: shop
policies:
  - name: orders.create
    rate: 10
    max_permits: 20
  - name: search
    rate: 120/min
    max_permits: 20
  - name: pings
    rate: 1/min
    max_permits: 1
";

/// Everything a plan or an apply could change: every policy as the admin reads it, and
/// the number of audit events.
async fn state_of(app: &TestApp) -> (serde_json::Value, usize) {
    (
        admin_reads(app, "/api/v1/policies").await,
        app.audit_count().await,
    )
}

/// The (policy, action) pairs of the plan on a page.
fn planned(page: &Page) -> Vec<(String, String)> {
    page.body
        .match_indices("<li class=\"plan-entry\" data-policy=\"")
        .map(|(i, m)| {
            let rest = &page.body[i + m.len()..];
            let name = &rest[..rest.find('"').unwrap()];
            let action_at = rest.find("data-action=\"").unwrap() + "data-action=\"".len();
            let action = &rest[action_at..action_at + rest[action_at..].find('"').unwrap()];
            (html_unescape(name), action.to_owned())
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(n, a)| ((*n).to_owned(), (*a).to_owned()))
        .collect()
}

/// The form's plan of `file`, as a browser sends it: from the form page, line breaks as
/// CRLF, prune ticked or not.
async fn plan_of(browser: &mut Browser, file: &str, prune: bool) -> Page {
    let form = browser.get("/policy-files/apply").await;
    form.assert_status(StatusCode::OK);
    let mut fields = vec![("file", file.replace('\n', "\r\n"))];
    if prune {
        fields.push(("prune", "true".to_owned()));
    }
    let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    browser.submit(&form, "/policy-files/plan", &fields).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_download_is_the_api_export_and_planning_it_changes_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_billing(&app).await;
    // A policy in units of its own (which a file sets), kept in the download.
    let r = app
        .client
        .post(app.url("/api/v1/apply"))
        .bearer_auth(&app.admin_token)
        .body("app: shop\npolicies:\n  - name: daily\n    rate: 100/day\n    max_permits: 100\n")
        .send()
        .await
        .unwrap();
    expect_status(r, StatusCode::OK).await;
    let exported = app
        .client
        .get(app.url("/api/v1/export?app=shop"))
        .bearer_auth(&app.admin_token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(exported.contains("rate: 100/day"), "{exported}");

    // Anyone who may view shop has the link, and gets the same file.
    let mut vic = app.sign_in("vic").await;
    let shop_page = vic.get("/apps/shop").await;
    assert!(shop_page.has("href=\"/apps/shop/policies.yaml\""));
    assert!(
        !shop_page.has("href=\"/policy-files/apply\""),
        "a viewer is not offered to apply a file"
    );
    let download = vic.get("/apps/shop/policies.yaml").await;
    download.assert_status(StatusCode::OK);
    assert_eq!(download.header("content-type"), Some("application/yaml"));
    assert_eq!(
        download.header("content-disposition"),
        Some("attachment; filename=\"shop-policies.yaml\"")
    );
    assert_eq!(download.body, exported);
    // Others may not.
    let mut bill = app.sign_in("bill").await;
    bill.get("/apps/shop/policies.yaml")
        .await
        .assert_status(StatusCode::FORBIDDEN);
    bill.get("/apps/nowhere/policies.yaml")
        .await
        .assert_status(StatusCode::NOT_FOUND);

    // Planned back, even with prune, every policy is unchanged and there is nothing to apply.
    let mut olga = app.sign_in("olga").await;
    assert!(
        olga.get("/apps/shop")
            .await
            .has("href=\"/policy-files/apply\"")
    );
    let before = state_of(&app).await;
    let plan = plan_of(&mut olga, &download.body, true).await;
    plan.assert_status(StatusCode::OK);
    assert_eq!(
        planned(&plan),
        pairs(&[
            ("daily", "unchanged"),
            ("old", "unchanged"),
            ("orders.create", "unchanged"),
            ("search", "unchanged"),
        ])
    );
    assert!(plan.has("Plan: 0 to create, 0 to update, 0 to delete, 4 unchanged."));
    assert!(plan.has("id=\"nothing-to-apply\""));
    assert!(
        !plan.has("action=\"/policy-files/apply\""),
        "no apply button"
    );
    assert_eq!(state_of(&app).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_changes_nothing_until_applied_as_the_signed_in_user() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_billing(&app).await;
    let mut olga = app.sign_in("olga").await;
    assert!(olga.get("/apps").await.has("href=\"/policy-files/apply\""));
    let before = state_of(&app).await;

    let plan = plan_of(&mut olga, SHOP_FILE, true).await;
    plan.assert_status(StatusCode::OK);
    assert_eq!(
        planned(&plan),
        pairs(&[
            ("pings", "create"),
            ("search", "update"),
            ("old", "delete"),
            ("orders.create", "unchanged"),
        ]),
        "what changes first, in that order; the unchanged apart"
    );
    assert!(plan.has("Plan: 1 to create, 1 to update, 1 to delete, 1 unchanged."));
    let unchanged = plan
        .text_of("plan-unchanged")
        .expect("the unchanged, folded");
    assert!(
        unchanged.starts_with("1 unchanged orders.create"),
        "{unchanged}"
    );
    // A delete says what the policy decided over the last hour.
    let deleted = plan.body.split("data-policy=\"old\"").nth(1).unwrap();
    assert!(
        deleted.contains("No client acquired it in the last hour."),
        "{deleted}"
    );
    // The update's change, in the file's units on both sides.
    assert!(
        plan.has("<span class=\"change-field\">rate</span>:\n    <del>600/min</del>"),
        "{}",
        plan.body
    );
    assert!(plan.has("<ins>120/min</ins>"));
    assert_eq!(state_of(&app).await, before, "a plan changes nothing");

    // The plan's own form carries the file, prune and the plan's id.
    assert_eq!(
        plan.field("/policy-files/apply", "file").as_deref(),
        Some(SHOP_FILE)
    );
    let applied = olga.submit(&plan, "/policy-files/apply", &[]).await;
    applied.assert_redirect("/policy-files/apply");
    let after = olga.get("/policy-files/apply").await;
    after.assert_status(StatusCode::OK);
    assert!(
        after.has("Applied: 1 created, 1 updated, 1 deleted, 1 unchanged."),
        "{}",
        after.body
    );
    assert!(after.has("created <a href=\"/policies/pings\"><code>pings</code></a>"));
    // Said once: a reload does not say it again.
    assert!(!olga.get("/policy-files/apply").await.has("Applied:"));

    let search = admin_reads(&app, "/api/v1/policies/search").await;
    assert_eq!(
        (search["rate"].as_f64(), search["version"].as_i64()),
        (Some(2.0), Some(2))
    );
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/pings").await["max_permits"],
        1
    );
    let old = app.get("/api/v1/policies/old", &app.admin_token).await;
    assert_eq!(old.status(), StatusCode::NOT_FOUND);
    // Audited as olga, one event per change.
    let events = app.audit("?user=olga").await;
    let mut done: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            assert_eq!(e["actor"], "olga");
            (
                e["action"].as_str().unwrap().to_owned(),
                e["entity_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    done.sort();
    assert_eq!(
        done,
        pairs(&[("create", "pings"), ("delete", "old"), ("update", "search")])
    );
    assert_eq!(newest_event(&app).await["actor"], "olga");
    // From the console, as one change set: the log links each of them to all three.
    let sets: Vec<&str> = events
        .iter()
        .map(|e| {
            assert_eq!(e["source"], "console", "{e}");
            e["change_set"].as_str().expect("a change set")
        })
        .collect();
    assert!(sets.iter().all(|s| *s == sets[0]), "{sets:?}");
    let link = format!("/audit?change_set={}", sets[0]);
    let mut admin = app.sign_in_as_admin().await;
    assert!(
        admin
            .get("/audit")
            .await
            .has(&format!("<a href=\"{link}\">with a policy file</a>"))
    );
    let set = admin.get(&link).await;
    set.assert_status(StatusCode::OK);
    assert!(set.has("id=\"change-set\""));
    assert_eq!(
        set.body.matches("with a policy file</a>").count(),
        3,
        "{}",
        set.body
    );
    // A change made outside the file is no part of it, and says where it came from.
    app.create_policy(json!({"name": "later", "owner_app": "shop", "rate": 1, "max_permits": 1}))
        .await;
    assert_eq!(newest_event(&app).await["source"], "api");
    assert_eq!(
        admin
            .get(&link)
            .await
            .body
            .matches("with a policy file</a>")
            .count(),
        3
    );
    admin
        .get("/audit?change_set=nonsense")
        .await
        .assert_status(StatusCode::BAD_REQUEST);
}

/// olga owns shop, not billing: a file touching billing is refused naming billing (and
/// not shop), and changes nothing, planned or applied. vic, who owns nothing, has no form.
async fn a_file_touching_another_app_is_refused(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    let file = format!(
        "{SHOP_FILE}---\napp: billing\npolicies:\n  - name: invoices.list\n    rate: 1\n    max_permits: 1\n"
    );
    let before = state_of(&app).await;

    let mut olga = app.sign_in("olga").await;
    let plan = plan_of(&mut olga, &file, false).await;
    plan.assert_status(StatusCode::FORBIDDEN);
    let alert = plan.alert().unwrap();
    assert!(
        alert.contains("you may not change the policies of billing."),
        "{alert}"
    );
    assert!(planned(&plan).is_empty(), "no plan shown");
    assert!(!plan.has("action=\"/policy-files/apply\""));
    // The text is kept, to be corrected.
    assert_eq!(
        plan.field("/policy-files/plan", "file").as_deref(),
        Some(file.as_str())
    );
    // An apply sent anyway (a plan id made up) is refused the same way.
    let forced = olga
        .post_form(
            "/policy-files/apply",
            &[("file", file.as_str()), ("plan_id", "0123456789ab")],
        )
        .await;
    forced.assert_status(StatusCode::FORBIDDEN);
    assert!(forced.alert().unwrap().contains("policies of billing."));

    // A viewer who owns nothing is told so, without a form; a forged plan is a 403.
    let mut vic = app.sign_in("vic").await;
    assert!(!vic.get("/apps").await.has("href=\"/policy-files/apply\""));
    let page = vic.get("/policy-files/apply").await;
    page.assert_status(StatusCode::FORBIDDEN);
    assert!(page.has("You do not own any application"));
    assert!(!page.has("action=\"/policy-files/plan\""));
    let forged = vic
        .post_form("/policy-files/plan", &[("file", SHOP_FILE)])
        .await;
    forged.assert_status(StatusCode::FORBIDDEN);
    // Refused before the file is read.
    let alert = forged.alert().unwrap();
    assert!(
        alert.contains("Nothing was read: you may not change the policies of any application."),
        "{alert}"
    );

    assert_eq!(state_of(&app).await, before, "nothing changed");
}
on_every_backend!(
    another_apps_file_is_refused,
    a_file_touching_another_app_is_refused
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_file_is_shown_with_its_document_and_line() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_billing(&app).await;
    let mut olga = app.sign_in("olga").await;
    let before = state_of(&app).await;

    // The second document's `window` is on line 17 of the file (SHOP_FILE has 11).
    let file = format!(
        "{SHOP_FILE}---\napp: shop\npolicies:\n  - name: reports\n    algorithm: fixed_window\n    window: soon\n    max_permits: 5\n"
    );
    let page = plan_of(&mut olga, &file, false).await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        page.has("The file has errors; nothing was planned or changed:"),
        "{}",
        page.body
    );
    assert!(
        page.has("document 2, line 17: policy 1, window: must be a whole number of ms"),
        "{}",
        page.body
    );
    assert_eq!(
        page.field("/policy-files/plan", "file").as_deref(),
        Some(file.as_str()),
        "the text is kept"
    );

    // What only the database knows is named by policy and field.
    let unknown = SHOP_FILE.replace(
        "    max_permits: 1\n",
        "    max_permits: 1\n    allowed_apps: [shop, nowhere]\n",
    );
    let page = plan_of(&mut olga, &unknown, false).await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("pings.allowed_apps"), "{}", page.body);

    // Nothing pasted.
    let page = plan_of(&mut olga, " \n", false).await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.alert().unwrap().contains("The file is empty"));
    // Neither form works without the session's CSRF token.
    for path in ["/policy-files/plan", "/policy-files/apply"] {
        let page = olga
            .post_with_csrf(path, &[("file", SHOP_FILE), ("plan_id", "x")], None)
            .await;
        page.assert_status(StatusCode::FORBIDDEN);
        assert!(page.has("Form expired"), "{path}: {}", page.body);
    }
    // An apply without a plan.
    let page = olga
        .post_form("/policy-files/apply", &[("file", SHOP_FILE)])
        .await;
    page.assert_status(StatusCode::BAD_REQUEST);
    assert!(page.has("Show the plan first"));

    assert_eq!(state_of(&app).await, before, "nothing changed");
}

/// A policy edited between the plan and its apply: the apply is a 409 naming it, applies
/// nothing (not even the other changes), and shows the plan as it is now, which applies.
async fn a_stale_plan_applies_nothing(db: Db) {
    let app = spawn_app(db).await;
    shop_and_billing(&app).await;
    let mut olga = app.sign_in("olga").await;
    let plan = plan_of(&mut olga, SHOP_FILE, false).await;
    plan.assert_status(StatusCode::OK);

    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/search",
            &app.admin_token,
            Some(json!({"max_permits": 30, "version": 1})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;
    let before = state_of(&app).await;

    let stale = olga.submit(&plan, "/policy-files/apply", &[]).await;
    stale.assert_status(StatusCode::CONFLICT);
    let alert = stale.alert().unwrap();
    assert!(alert.contains("Nothing was applied"), "{alert}");
    assert!(
        stale.has("changed since it was made: search"),
        "{}",
        stale.body
    );
    assert_eq!(state_of(&app).await, before, "nothing applied");
    // The plan as it is now: search's update now also sets max_permits back to 20.
    assert!(stale.has("<span class=\"change-field\">max_permits</span>"));
    assert_ne!(
        stale.field("/policy-files/apply", "plan_id"),
        plan.field("/policy-files/apply", "plan_id")
    );
    olga.submit(&stale, "/policy-files/apply", &[])
        .await
        .assert_redirect("/policy-files/apply");
    let search = admin_reads(&app, "/api/v1/policies/search").await;
    assert_eq!(
        (search["max_permits"].as_i64(), search["rate"].as_f64()),
        (Some(20), Some(2.0))
    );
}
on_every_backend!(a_stale_plan_is_refused, a_stale_plan_applies_nothing);
