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
