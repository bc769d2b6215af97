//! The audit log page: newest first, filters, and paging.

use reqwest::StatusCode;
use serde_json::json;

use super::{policy_fields, shop_and_people};
use crate::helpers::*;

/// (who, application, what, action) of each row of the audit page, top to bottom.
fn audit_rows(page: &Page) -> Vec<[String; 4]> {
    let Some(start) = page.body.find("<tbody>") else {
        return Vec::new();
    };
    let end = page.body[start..].find("</tbody>").unwrap() + start;
    page.body[start..end]
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let cells: Vec<String> = row
                .split("<td")
                .skip(1)
                .map(|cell| {
                    let open = cell.find('>').unwrap() + 1;
                    let close = cell.find("</td>").unwrap();
                    html_unescape(&strip_tags(&cell[open..close]))
                })
                .collect();
            [
                cells[1].clone(),
                cells[2].clone(),
                cells[3].clone(),
                cells[4].clone(),
            ]
        })
        .collect()
}

/// The target of the link with this `rel`, if the page has one.
fn link(page: &Page, rel: &str) -> Option<String> {
    let at = page.body.find(&format!("rel=\"{rel}\""))?;
    let tag_start = page.body[..at].rfind("<a ")?;
    let href = page.body[tag_start..].find("href=\"")? + tag_start + "href=\"".len();
    let end = page.body[href..].find('"')? + href;
    Some(html_unescape(&page.body[href..end]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_lists_changes_newest_first_and_filters_them() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut admin = app.sign_in_as_admin().await;
    let mut olga = app.sign_in("olga").await;
    let mut otto = app.sign_in("otto").await;
    for name in ["p1", "p2"] {
        olga.post_form("/apps/shop/policies", &policy_fields(name, "5"))
            .await
            .assert_redirect("/apps/shop?done=policy-created");
    }
    let form = olga.get("/policies/p1/edit").await;
    olga.submit(&form, "/policies/p1/edit", &[("max_permits", "6")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let mut fields = policy_fields("o1", "5");
    fields[5] = ("allowed_apps", "other");
    otto.post_form("/apps/other/policies", &fields)
        .await
        .assert_redirect("/apps/other?done=policy-created");

    let row = |who: &str, app: &str, what: &str, action: &str| {
        [who, app, what, action].map(str::to_owned)
    };
    let rows = audit_rows(&admin.get("/audit").await);
    assert_eq!(
        rows[..4],
        [
            row("otto", "other", "policy o1", "created in the console"),
            row("olga", "shop", "policy p1", "changed in the console"),
            row("olga", "shop", "policy p2", "created in the console"),
            row("olga", "shop", "policy p1", "created in the console"),
        ]
    );

    // Each policy the log names links to its page.
    let page = admin.get("/audit").await;
    assert!(
        page.has("<a href=\"/policies/p1\"><strong>p1</strong></a>"),
        "{}",
        page.body
    );

    let rows = audit_rows(&admin.get("/audit?app=shop").await);
    assert!(rows.iter().all(|r| r[1] == "shop"), "{rows:?}");
    assert!(rows.contains(&row("olga", "shop", "policy p1", "changed in the console")));

    let rows = audit_rows(&admin.get("/audit?user=olga").await);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r[0] == "olga"));

    let rows = audit_rows(&admin.get("/audit?policy=p1").await);
    assert_eq!(
        rows,
        [
            row("olga", "shop", "policy p1", "changed in the console"),
            row("olga", "shop", "policy p1", "created in the console"),
        ]
    );
    let page = admin.get("/audit?policy=nothing").await;
    assert!(audit_rows(&page).is_empty());
    assert!(page.has("No event matches these filters."));

    // A viewer of shop sees shop's events, and nothing of an application they do not
    // belong to (nor of users).
    let mut vic = app.sign_in("vic").await;
    let rows = audit_rows(&vic.get("/audit").await);
    assert_eq!(
        rows[0],
        row("olga", "shop", "policy p1", "changed in the console")
    );
    assert!(rows.iter().all(|r| r[1] == "shop"), "{rows:?}");
    assert!(audit_rows(&vic.get("/audit?app=other").await).is_empty());
    assert!(audit_rows(&vic.get("/audit?user=otto").await).is_empty());
}

/// Enough member changes through the API that the audit log has `count` events.
async fn audit_log_of(app: &TestApp, count: usize) {
    let mut have = app.audit_count().await;
    let mut role = "owner";
    while have < count {
        let r = app
            .send(
                "PUT",
                "/api/v1/apps/shop/members/olga",
                &app.admin_token,
                Some(json!({"role": role})),
            )
            .await;
        expect_status(r, StatusCode::OK).await;
        role = if role == "owner" { "viewer" } else { "owner" };
        have += 1;
    }
    assert_eq!(app.audit_count().await, count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_audit_log_has_a_second_page() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "viewer"))).await;
    let mut admin = app.sign_in_as_admin().await;
    audit_log_of(&app, 57).await;

    let first = admin.get("/audit").await;
    assert_eq!(audit_rows(&first).len(), 50);
    assert!(link(&first, "prev").is_none());
    let next = link(&first, "next").expect("a link to page 2");
    assert_eq!(next, "/audit?app=&user=&policy=&from=&to=&page=2");
    let second = admin.get(&next).await;
    second.assert_status(StatusCode::OK);
    assert_eq!(audit_rows(&second).len(), 7);
    assert!(link(&second, "next").is_none());
    assert_eq!(
        link(&second, "prev").as_deref(),
        Some("/audit?app=&user=&policy=&from=&to=&page=1")
    );
    // The oldest event is the first change the tests made: the app's creation.
    assert_eq!(audit_rows(&second).last().unwrap()[2], "user admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_log_of_exactly_one_page_has_no_next_link() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "viewer"))).await;
    let mut admin = app.sign_in_as_admin().await;
    audit_log_of(&app, 50).await;

    let first = admin.get("/audit").await;
    assert_eq!(audit_rows(&first).len(), 50);
    assert_eq!(link(&first, "next"), None, "page 2 would be empty");
}

/// Every kind of change not audited in a test of its own leaves exactly its audit event,
/// naming who did what to which entity: deleting an application, revoking one's access
/// token, setting one's own password, an admin resetting another's, disabling a user,
/// rotating an API key (two: the new key's creation, and the rotation of the old one),
/// resetting a caller's bucket. (Applying a policy file and rolling
/// a policy back are checked in `admin_api::apply` and `admin_api::policy_history`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_other_change_leaves_its_audit_event() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    app.create_app("gone").await;
    app.create_policy(json!({
        "name": "logins", "owner_app": "shop", "scope": "per_key", "rate": 1, "max_permits": 5
    }))
    .await;
    let mut admin = app.sign_in_as_admin().await;
    let mut olga = app.sign_in("olga").await;
    let admin_token = app.admin_token.clone();
    // The id of one of olga's access tokens, as her account page shows it.
    let account = olga.get("/account").await;
    let at = account
        .body
        .find("data-token=\"")
        .expect("a token on /account")
        + 12;
    let olgas_token: String = account.body[at..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();

    // Each change, then the events it must add, newest first: (actor, entity type,
    // action, entity), and not one more.
    let mut seen = app.audit_count().await;
    let mut expect_events = async |change: &str, want: &[[&str; 4]]| {
        let events = app.audit("").await;
        let count = app.audit_count().await;
        assert_eq!(count, seen + want.len(), "{change}: new audit events");
        seen = count;
        for (event, want) in events.iter().zip(want) {
            let got = ["actor", "entity_type", "action", "entity_id"].map(|f| event[f].as_str());
            assert_eq!(got, want.map(Some), "{change}: {event}");
        }
    };

    let r = app
        .send("DELETE", "/api/v1/apps/gone", &admin_token, None)
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    expect_events("app delete", &[["admin", "app", "delete", "gone"]]).await;

    olga.post_form(&format!("/account/tokens/{olgas_token}/revoke"), &[])
        .await
        .assert_redirect("/account?done=token-revoked#tokens");
    expect_events(
        "token revoke",
        &[["olga", "access_token", "revoke", &olgas_token]],
    )
    .await;

    let new_password = "olgas brand new password";
    olga.post_form(
        "/account/password",
        &[
            ("current_password", PASSWORD),
            ("new_password", new_password),
            ("confirm_password", new_password),
        ],
    )
    .await
    .assert_redirect("/account?done=password-changed");
    expect_events("own password", &[["olga", "user", "set_password", "olga"]]).await;

    admin
        .post_form("/users/otto/password", &[("password", "set by the admin")])
        .await
        .assert_redirect("/users?done=password-reset");
    expect_events(
        "password reset",
        &[["admin", "user", "set_password", "otto"]],
    )
    .await;

    admin
        .post_form("/users/ulla", &[("role", "member"), ("disabled", "on")])
        .await
        .assert_redirect("/users?done=user-updated");
    expect_events("user disable", &[["admin", "user", "update", "ulla"]]).await;
    let disabled = app.audit("").await[0]["after"].clone();
    assert_eq!(disabled, json!({"admin": false, "disabled": true}));

    let r = app
        .post(
            &format!("/api/v1/apps/shop/keys/{key_id}/rotate"),
            &admin_token,
            json!({"old_key_expires_at": "now"}),
        )
        .await;
    let rotated = expect_status(r, StatusCode::CREATED).await;
    let new_key_id = rotated["id"].as_str().unwrap().to_owned();
    expect_events(
        "key rotate",
        &[
            ["admin", "api_key", "rotate", &key_id],
            ["admin", "api_key", "create", &new_key_id],
        ],
    )
    .await;

    let r = app
        .send(
            "DELETE",
            "/api/v1/policies/logins/state?key=mallory",
            &admin_token,
            None,
        )
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    expect_events(
        "bucket reset",
        &[["admin", "policy", "reset_bucket", "logins"]],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_log_says_whose_changes_it_would_show() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("quiet").await;
    app.create_user("ulla", None).await;
    let mut ulla = app.sign_in("ulla").await;
    let mut admin = app.sign_in_as_admin().await;
    let all = admin.get("/audit").await;
    assert!(
        !all.has("No change you may see"),
        "an admin sees every change"
    );
    let none = ulla.get("/audit").await;
    assert!(
        none.has("No change you may see has been made yet"),
        "{}",
        none.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_rotations_and_revocations_read_as_words() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let shop = super::admin_reads(&app, "/api/v1/apps/shop").await;
    let id = shop["keys"][0]["id"].as_str().unwrap().to_owned();
    let r = app
        .post(
            &format!("/api/v1/apps/shop/keys/{id}/rotate"),
            &app.admin_token,
            json!({"old_key_expires_at": "2031-01-31T18:00:00Z"}),
        )
        .await;
    expect_status(r, StatusCode::CREATED).await;
    let r = app
        .send(
            "DELETE",
            &format!("/api/v1/apps/shop/keys/{id}"),
            &app.admin_token,
            None,
        )
        .await;
    expect_status(r, StatusCode::NO_CONTENT).await;

    let mut admin = app.sign_in_as_admin().await;
    let page = admin.get("/audit").await;
    let text = html_unescape(&strip_tags(&page.body))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        // The arrow's words for screen readers.
        .replace("→ becomes", "→");
    assert!(
        text.contains("old key works until: 2031-01-31 18:00:00 UTC"),
        "{text}"
    );
    assert!(text.contains("status: working → revoked"), "{text}");
    assert!(!text.contains("(removed)"), "{text}");
    assert!(!text.contains("{\""), "no raw JSON: {text}");
}
