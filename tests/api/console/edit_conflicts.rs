//! Two people editing one policy at once (README, "The web console"): a save applies only
//! the fields its user changed onto the version saved meanwhile; a field both changed is
//! shown with both values, and only the value the user chooses is saved. Allowed
//! applications compare as a set.

use reqwest::StatusCode;
use serde_json::json;

use super::history::entry;
use super::{admin_reads, shop_and_people};
use crate::helpers::*;
use crate::on_every_backend;

const EDIT: &str = "/policies/orders.create/edit";
const POLICY: &str = "/api/v1/policies/orders.create";

/// The admin changes the policy through the API, as a colleague in another tab would.
async fn meanwhile(app: &TestApp, change: serde_json::Value) {
    let r = app
        .send("PATCH", POLICY, &app.admin_token, Some(change))
        .await;
    expect_status(r, StatusCode::OK).await;
}

/// The policy's (rate, max permits, version, description).
async fn stored(app: &TestApp) -> (f64, i64, i64, String) {
    let p = admin_reads(app, POLICY).await;
    (
        p["rate"].as_f64().unwrap(),
        p["max_permits"].as_i64().unwrap(),
        p["version"].as_i64().unwrap(),
        p["description"].as_str().unwrap().to_owned(),
    )
}

/// The form of `page` with the choice of `field` set to `side`, as sent.
fn choosing(page: &Page, field: &str, side: &str) -> Vec<(String, String)> {
    let mut fields = page.form(EDIT);
    let unchosen = format!("{field}:");
    let choice = fields
        .iter_mut()
        .find(|(n, v)| n == "keep" && *v == unchosen)
        .unwrap_or_else(|| panic!("a choice for {field}: {}", page.body));
    choice.1 = format!("{field}:{side}");
    fields
}

async fn edits_to_different_fields_are_merged(db: Db) {
    let app = spawn_app(db).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get(EDIT).await;
    meanwhile(&app, json!({"rate": 300})).await;
    // Olga, still on the old form, changes only max permits.
    olga.submit(&form, EDIT, &[("max_permits", "7")])
        .await
        .assert_redirect("/apps/shop?done=policy-merged");
    assert_eq!(stored(&app).await, (300.0, 7, 3, String::new()));

    // Her version records her change alone: the colleague's rate is not undone.
    let history = olga.get("/policies/orders.create/history").await;
    let v3 = entry(&history, 3);
    assert!(v3.contains("max permits: 20 → 7"), "{v3}");
    assert!(!v3.contains("rate"), "{v3}");
    let shop = olga.get("/apps/shop?done=policy-merged").await;
    assert!(
        shop.has("merged with a change someone else saved"),
        "{}",
        shop.body
    );
}
on_every_backend!(
    edits_to_different_fields_are_merged,
    edits_to_different_fields_are_merged
);

async fn a_field_both_changed_is_saved_only_as_chosen(db: Db) {
    let app = spawn_app(db).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get(EDIT).await;
    meanwhile(&app, json!({"max_permits": 50})).await;
    let page = olga
        .submit(
            &form,
            EDIT,
            &[("max_permits", "7"), ("description", "mine")],
        )
        .await;
    page.assert_status(StatusCode::CONFLICT);
    assert!(page.has("saved version 2 of this policy"), "{}", page.body);
    assert!(
        page.has("You both changed the max permits"),
        "{}",
        page.body
    );
    assert!(
        page.has("Your change to the description is kept"),
        "{}",
        page.body
    );
    assert!(page.has(">Theirs: 50</option>"), "{}", page.body);
    assert!(page.has(">Yours: 7</option>"), "{}", page.body);
    assert_eq!(
        stored(&app).await,
        (10.0, 50, 2, String::new()),
        "nothing saved"
    );
    assert_eq!(page.field(EDIT, "version").as_deref(), Some("2"));
    assert_eq!(page.field(EDIT, "description").as_deref(), Some("mine"));

    // Saving without choosing saves nothing and asks again.
    let again = olga.submit(&page, EDIT, &[]).await;
    again.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        again.has("Choose whose value to keep for the max permits"),
        "{}",
        again.body
    );
    assert!(again.has(">Theirs: 50</option>"), "{}", again.body);
    assert_eq!(stored(&app).await, (10.0, 50, 2, String::new()));

    // Theirs kept: their max permits, her description.
    olga.post_raw(EDIT, &choosing(&again, "max_permits", "theirs"))
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(stored(&app).await, (10.0, 50, 3, "mine".to_owned()));

    // Another round, in which she keeps hers.
    let form = olga.get(EDIT).await;
    meanwhile(&app, json!({"max_permits": 60})).await;
    let page = olga.submit(&form, EDIT, &[("max_permits", "8")]).await;
    page.assert_status(StatusCode::CONFLICT);
    olga.post_raw(EDIT, &choosing(&page, "max_permits", "yours"))
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(stored(&app).await, (10.0, 8, 5, "mine".to_owned()));
}
on_every_backend!(
    a_field_both_changed_is_saved_only_as_chosen,
    a_field_both_changed_is_saved_only_as_chosen
);

async fn allowed_applications_compare_as_a_set(db: Db) {
    let app = spawn_app(db).await;
    shop_and_people(&app).await;
    meanwhile(&app, json!({"allowed_apps": ["shop", "other"]})).await;
    // The same applications in another order change nothing.
    meanwhile(&app, json!({"allowed_apps": ["other", "shop"]})).await;
    let p = admin_reads(&app, POLICY).await;
    assert_eq!(
        (p["version"].clone(), p["allowed_apps"].clone()),
        (json!(2), json!(["shop", "other"]))
    );

    // The form lists them by name; a save of another field records that field alone.
    let mut olga = app.sign_in("olga").await;
    let form = olga.get(EDIT).await;
    olga.submit(&form, EDIT, &[("max_permits", "9")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let history = olga.get("/policies/orders.create/history").await;
    let v3 = entry(&history, 3);
    assert!(v3.contains("max permits: 20 → 9"), "{v3}");
    assert!(!v3.contains("allowed applications"), "{v3}");

    // Both adding the same application is no collision.
    let form = olga.get(EDIT).await;
    app.create_app("billing").await;
    meanwhile(&app, json!({"allowed_apps": ["shop", "other", "billing"]})).await;
    let mut fields = form.form(EDIT);
    fields.push(("allowed_apps".to_owned(), "billing".to_owned()));
    fields.retain(|(n, _)| n != "max_permits");
    fields.push(("max_permits".to_owned(), "11".to_owned()));
    olga.post_raw(EDIT, &fields)
        .await
        .assert_redirect("/apps/shop?done=policy-merged");
    let p = admin_reads(&app, POLICY).await;
    assert_eq!(
        (p["version"].clone(), p["max_permits"].clone()),
        (json!(5), json!(11))
    );
}
on_every_backend!(
    allowed_applications_compare_as_a_set,
    allowed_applications_compare_as_a_set
);
