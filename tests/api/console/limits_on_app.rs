//! "Limits on this application": the policies of other applications that allow it, listed
//! on its page, and visible (never editable) to its members, so a 429 from another
//! application's limit can be traced. Read with SQL's LIKE over the stored list, so run on
//! every backend.

use reqwest::StatusCode;
use serde_json::json;

use super::shop_and_people;
use crate::helpers::*;
use crate::on_every_backend;

async fn limits_of_other_apps_are_listed_and_visible(db: Db) {
    let app = spawn_app(db).await;
    shop_and_people(&app).await;
    app.create_app("billing").await;
    app.create_app("shop-eu").await;
    for (name, allowed) in [
        ("invoices", json!(["billing", "shop"])),
        ("internal", json!(["billing"])),
        ("eu-only", json!(["billing", "shop-eu"])),
    ] {
        app.create_policy(json!({"name": name, "owner_app": "billing", "rate": 2,
                                 "max_permits": 7, "allowed_apps": allowed}))
            .await;
    }
    let mut vic = app.sign_in("vic").await;

    let page = vic.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-limit-on-app=\"invoices\""), "{}", page.body);
    assert!(page.has("href=\"/policies/invoices\""));
    assert!(!page.has("data-limit-on-app=\"internal\""));
    assert!(
        !page.has("data-limit-on-app=\"eu-only\""),
        "shop-eu is another application than shop"
    );
    assert!(
        !page.has("data-limit-on-app=\"orders.create\""),
        "shop's own"
    );

    // A viewer of shop may open the policy that limits shop's keys, and change nothing.
    let policy = vic.get("/policies/invoices").await;
    policy.assert_status(StatusCode::OK);
    assert!(policy.has("Policy <code>invoices</code>"));
    assert!(!policy.has("id=\"edit-policy\""));
    vic.get("/policies/invoices/edit")
        .await
        .assert_status(StatusCode::FORBIDDEN);
    vic.get("/policies/internal")
        .await
        .assert_status(StatusCode::FORBIDDEN);

    // The owner of an application no policy of another allows sees that said.
    let mut otto = app.sign_in("otto").await;
    let other = otto.get("/apps/other").await;
    assert!(other.has("No other application's policy allows"));
}

on_every_backend!(
    limits_on_this_application,
    limits_of_other_apps_are_listed_and_visible
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_teams_limit_says_what_it_did_to_this_application() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_app("billing").await;
    let shop_key = app.create_key("shop").await;
    app.create_policy(
        json!({"name": "invoices", "owner_app": "billing", "rate": 0.001,
                             "max_permits": 1, "allowed_apps": ["billing", "shop"]}),
    )
    .await;
    app.create_policy(
        json!({"name": "lookups", "owner_app": "billing", "rate": 0.001,
                             "max_permits": 1, "allowed_apps": ["billing", "shop"],
                             "scope": "per_key"}),
    )
    .await;
    // Shop's key: one grant, then three denials from billing's limit.
    for _ in 0..4 {
        app.acquire(&shop_key, "invoices", 1).await;
    }
    let mut admin = app.sign_in_as_admin().await;
    let shown = eventually(std::time::Duration::from_secs(10), || {
        let mut admin = admin.clone();
        async move {
            admin
                .get("/apps/shop")
                .await
                .has("<span class=\"badge denying\">Denying 75%</span> <small class=\"muted\">1 granted, 3 denied (75%)</small>")
        }
    })
    .await;
    let page = admin.get("/apps/shop").await;
    assert!(shown, "{}", page.body);
    assert!(page.has("Counted per key: see its page"), "{}", page.body);
    // Billing's own page counts them as its policy's denials, not as billing's callers'.
    let billing = admin.get("/apps/billing").await;
    assert!(billing.has("1 granted, 3 denied (75%)"), "{}", billing.body);
}
