//! The last-owner guard: a change that would leave an application without an owner is
//! refused for members ("make someone else owner first"), in the console and the API
//! alike; an admin may make it, after confirming in the console.

use reqwest::StatusCode;
use serde_json::json;

use super::admin_reads;
use crate::helpers::*;
use crate::on_every_backend;

/// The roles in shop, as the admin reads them.
async fn roles(app: &TestApp) -> String {
    admin_reads(app, "/api/v1/apps/shop").await["members"].to_string()
}

async fn the_last_owner_cannot_leave_the_app_without_one(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let olga_token = app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_user("vic", Some(("shop", "viewer"))).await;
    let mut olga = app.sign_in("olga").await;
    let before = roles(&app).await;
    let events = app.audit_count().await;

    // Demoting herself, or removing herself, in the console: refused, nothing changes.
    let page = olga
        .post_form(
            "/apps/shop/members",
            &[("username", "olga"), ("role", "viewer")],
        )
        .await;
    page.assert_status(StatusCode::CONFLICT);
    assert!(page.has("make someone else owner first"), "{}", page.body);
    let page = olga.post_form("/apps/shop/members/olga/remove", &[]).await;
    page.assert_status(StatusCode::CONFLICT);
    assert!(page.has("make someone else owner first"));
    // A member's forged confirmation changes nothing either.
    let page = olga
        .post_form(
            "/apps/shop/members/olga/remove",
            &[("confirm_ownerless", "yes")],
        )
        .await;
    page.assert_status(StatusCode::CONFLICT);

    // The API refuses the same, with its own problem type.
    let r = app
        .send(
            "PUT",
            "/api/v1/apps/shop/members/olga",
            &olga_token,
            Some(json!({"role": "viewer"})),
        )
        .await;
    let problem = expect_problem(r, StatusCode::CONFLICT).await;
    assert_eq!(problem["type"], "urn:ratekeeper:problem:last-owner");
    let r = app
        .send(
            "DELETE",
            "/api/v1/apps/shop/members/olga",
            &olga_token,
            None,
        )
        .await;
    expect_problem(r, StatusCode::CONFLICT).await;
    assert_eq!(roles(&app).await, before);
    assert_eq!(app.audit_count().await, events);

    // With another owner, she may step down.
    olga.post_form(
        "/apps/shop/members",
        &[("username", "vic"), ("role", "owner")],
    )
    .await
    .assert_redirect("/apps/shop?done=member-saved#members");
    olga.post_form(
        "/apps/shop/members",
        &[("username", "olga"), ("role", "viewer")],
    )
    .await
    .assert_redirect("/apps/shop?done=member-saved#members");
    let members = admin_reads(&app, "/api/v1/apps/shop").await["members"].clone();
    assert_eq!(
        members,
        json!([{"username": "olga", "role": "viewer"}, {"username": "vic", "role": "owner"}])
    );
}
on_every_backend!(
    last_owner_guard,
    the_last_owner_cannot_leave_the_app_without_one
);

async fn an_admin_confirms_before_leaving_an_app_without_owner(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut admin = app.sign_in_as_admin().await;
    let before = roles(&app).await;

    // The console asks first: a page with the same change, confirmed, as a plain form.
    let question = admin.post_form("/apps/shop/members/olga/remove", &[]).await;
    question.assert_status(StatusCode::CONFLICT);
    assert!(question.has("Leave <code>shop</code> without an owner?"));
    assert_eq!(roles(&app).await, before);
    assert_eq!(
        question
            .field("/apps/shop/members/olga/remove", "confirm_ownerless")
            .as_deref(),
        Some("yes")
    );
    admin
        .submit(&question, "/apps/shop/members/olga/remove", &[])
        .await
        .assert_redirect("/apps/shop?done=member-removed#members");
    assert_eq!(roles(&app).await, "[]");

    // Over the API an admin's change needs no confirmation.
    app.create_user("vic", Some(("shop", "owner"))).await;
    let r = app
        .send(
            "PUT",
            "/api/v1/apps/shop/members/vic",
            &app.admin_token,
            Some(json!({"role": "viewer"})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;
}
on_every_backend!(
    admin_confirms_ownerless,
    an_admin_confirms_before_leaving_an_app_without_owner
);
