//! A policy's history page (README, "History and rollback"): each version with its
//! author and what it changed, in the form's units; a rollback button for owners only,
//! which saves a new version; a stale rollback refused with the page showing why.

use reqwest::StatusCode;

use super::{admin_reads, policy_fields, shop_and_people};
use crate::helpers::*;
use crate::on_every_backend;

const HISTORY: &str = "/policies/p1/history";
const ROLLBACK: &str = "/policies/p1/rollback";

/// The text of the history entry of `version`, tags left out.
pub(super) fn entry(page: &Page, version: i64) -> String {
    let start = page
        .body
        .find(&format!("id=\"version-{version}\""))
        .unwrap_or_else(|| panic!("version {version} listed: {}", page.body));
    let rest = &page.body[start + 1..];
    let end = rest
        .find("<li id=\"version-")
        .or_else(|| rest.find("</ol>"))
        .map_or(page.body.len(), |e| e + start + 1);
    html_unescape(&strip_tags(&page.body[start..end]))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        // The arrow's words for screen readers.
        .replace("→ becomes", "→")
}

async fn an_owner_sees_each_version_and_rolls_back(db: Db) {
    let app = spawn_app(db).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    // Version 1: 5 per second, max 5; 2: 100 per minute; 3: max 8.
    olga.post_form("/apps/shop/policies", &policy_fields("p1", "5"))
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let form = olga.get("/policies/p1/edit").await;
    olga.submit(
        &form,
        "/policies/p1/edit",
        &[("rate", "100"), ("rate_unit", "minute")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let form = olga.get("/policies/p1/edit").await;
    olga.submit(&form, "/policies/p1/edit", &[("max_permits", "8")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");

    let page = olga.get(HISTORY).await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("<h1>History of <code>p1</code></h1>"));
    let v2 = entry(&page, 2);
    assert!(v2.contains("Changed by olga"), "{v2}");
    assert!(v2.contains("rate: 300 per minute → 100 per minute"), "{v2}");
    assert!(!v2.contains("max permits"), "{v2}");
    let v3 = entry(&page, 3);
    assert!(
        v3.contains("(current)") && v3.contains("max permits: 5 → 8"),
        "{v3}"
    );
    let v1 = entry(&page, 1);
    assert!(
        v1.contains("Created by olga") && v1.contains("rate: 5 per second"),
        "{v1}"
    );
    // A button for each version but the current one, naming it.
    assert!(page.has("Roll back to version 1") && page.has("Roll back to version 2"));
    assert!(!page.has("Roll back to version 3"));
    // The policy's page links here.
    assert!(
        olga.get("/policies/p1/overview")
            .await
            .has("href=\"/policies/p1/history\"")
    );

    // Rolling back to version 1 is version 4, equal to it.
    olga.submit(&page, ROLLBACK, &[("to_version", "1")])
        .await
        .assert_status(StatusCode::SEE_OTHER);
    let policy = admin_reads(&app, "/api/v1/policies/p1").await;
    assert_eq!(policy["version"], 4);
    assert_eq!(policy["rate"].as_f64(), Some(5.0));
    assert_eq!(policy["max_permits"], 5);
    let page = olga
        .get(&format!("{HISTORY}?done=policy-rolled-back"))
        .await;
    assert!(page.has("Rolled back: a new version"));
    let v4 = entry(&page, 4);
    assert!(v4.contains("Rolled back to version 1 by olga"), "{v4}");
    assert!(v4.contains("rate: 100 per minute → 300 per minute"), "{v4}");
    assert!(v4.contains("max permits: 8 → 5"), "{v4}");
    let event = &app.audit("?policy=p1").await[0];
    assert_eq!(
        (event["action"].as_str(), event["actor"].as_str()),
        (Some("rollback"), Some("olga"))
    );

    // A form from before that rollback (made at version 3) is refused: 409, nothing saved,
    // and the page says why.
    let stale = olga
        .post_form(ROLLBACK, &[("to_version", "2"), ("version", "3")])
        .await;
    stale.assert_status(StatusCode::CONFLICT);
    assert!(
        stale.alert().unwrap().contains("it is now version 4"),
        "{:?}",
        stale.alert()
    );
    assert_eq!(admin_reads(&app, "/api/v1/policies/p1").await["version"], 4);

    // A viewer sees the same history without any button.
    let mut vic = app.sign_in("vic").await;
    let page = vic.get(HISTORY).await;
    page.assert_status(StatusCode::OK);
    assert!(entry(&page, 2).contains("rate: 300 per minute → 100 per minute"));
    assert!(!page.has("Roll back to version"));
    assert!(!page.has("action=\"/policies/p1/rollback\""));
    // A bad page number is a sentence, not a parser's message.
    let bad = vic.get(&format!("{HISTORY}?before=soon")).await;
    bad.assert_status(StatusCode::BAD_REQUEST);
    assert!(bad.has("must be a version number"), "{}", bad.body);
}
on_every_backend!(
    owner_rolls_back_in_console,
    an_owner_sees_each_version_and_rolls_back
);

/// A deleted policy keeps a page at its address: who deleted it and when, the settings it
/// had, its history; owners may create it again from that version, viewers only read.
async fn a_deleted_policy_keeps_a_page(db: Db) {
    let app = spawn_app(db).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    olga.post_form("/apps/shop/policies", &policy_fields("p1", "5"))
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let form = olga.get("/policies/p1/edit").await;
    olga.submit(&form, "/policies/p1/edit", &[("max_permits", "8")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let confirm = olga.get("/policies/p1/delete").await;
    olga.submit(&confirm, "/policies/p1/delete", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-deleted");

    // The audit log's link to it leads to this page, for a viewer too (without a button).
    let mut vic = app.sign_in("vic").await;
    assert!(vic.get("/audit").await.has("href=\"/policies/p1\""));
    let page = vic.get("/policies/p1").await;
    page.assert_status(StatusCode::OK);
    let summary = page.text_of("deleted-summary").expect("the summary");
    assert!(
        summary.contains("olga deleted it") && summary.contains("at version 2"),
        "{summary}"
    );
    let last = page.text_of("last-version").expect("the last version");
    assert!(last.contains("max permits: 8"), "{last}");
    assert!(entry(&page, 2).contains("max permits: 5 → 8"));
    assert!(entry(&page, 1).contains("Created by olga"));
    assert!(!page.has("Recreate from this version") && !page.has("Roll back to version"));
    let refused = vic.post_form("/policies/p1/recreate", &[]).await;
    refused.assert_status(StatusCode::FORBIDDEN);
    // Someone who may not see shop learns nothing of it; a name never used is a 404.
    let mut ulla = app.sign_in("ulla").await;
    ulla.get("/policies/p1")
        .await
        .assert_status(StatusCode::NOT_FOUND);
    olga.get("/policies/never.was")
        .await
        .assert_status(StatusCode::NOT_FOUND);

    // The owner recreates it as it was: a new policy, version 1, with max permits 8.
    let page = olga.get("/policies/p1").await;
    olga.submit(&page, "/policies/p1/recreate", &[])
        .await
        .assert_redirect("/policies/p1?done=policy-recreated");
    let recreated = admin_reads(&app, "/api/v1/policies/p1").await;
    assert_eq!(
        (
            recreated["version"].as_i64(),
            recreated["max_permits"].as_i64()
        ),
        (Some(1), Some(8))
    );
    let page = olga.get("/policies/p1?done=policy-recreated").await;
    assert!(page.has("Policy created again as it was when it was deleted"));
    assert!(!page.has("id=\"deleted-badge\""));
}
on_every_backend!(deleted_policy_page, a_deleted_policy_keeps_a_page);
