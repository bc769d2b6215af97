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

/// The text of some HTML, its tags left out.
pub(super) fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
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
            row("otto", "other", "policy o1", "created"),
            row("olga", "shop", "policy p1", "changed"),
            row("olga", "shop", "policy p2", "created"),
            row("olga", "shop", "policy p1", "created"),
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
    assert!(rows.contains(&row("olga", "shop", "policy p1", "changed")));

    let rows = audit_rows(&admin.get("/audit?user=olga").await);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r[0] == "olga"));

    let rows = audit_rows(&admin.get("/audit?policy=p1").await);
    assert_eq!(
        rows,
        [
            row("olga", "shop", "policy p1", "changed"),
            row("olga", "shop", "policy p1", "created"),
        ]
    );
    let page = admin.get("/audit?policy=nothing").await;
    assert!(audit_rows(&page).is_empty());
    assert!(page.has("No event matches these filters."));

    // A viewer of shop sees shop's events, and nothing of an application they do not
    // belong to (nor of users).
    let mut vic = app.sign_in("vic").await;
    let rows = audit_rows(&vic.get("/audit").await);
    assert_eq!(rows[0], row("olga", "shop", "policy p1", "changed"));
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
