//! The audit log's filters (chosen from lists, and a date range), its diffs and key labels,
//! and its CSV export with the same filters (README, "Audit log"), on every backend.

use reqwest::StatusCode;
use serde_json::json;

use super::shop_and_people;
use crate::helpers::*;
use crate::on_every_backend;

/// Today and yesterday (UTC), as the date filters take them.
fn days() -> (String, String, String) {
    let today = chrono::Utc::now().date_naive();
    let fmt = |d: chrono::NaiveDate| d.format("%Y-%m-%d").to_string();
    (
        fmt(today - chrono::TimeDelta::days(1)),
        fmt(today),
        fmt(today + chrono::TimeDelta::days(1)),
    )
}

/// The options of the select list `name` on the page.
fn options(page: &Page, name: &str) -> Vec<String> {
    let start = page
        .body
        .find(&format!("name=\"{name}\""))
        .expect("the list");
    let end = page.body[start..].find("</select>").unwrap() + start;
    page.body[start..end]
        .split("<option value=\"")
        .skip(2)
        .map(|o| html_unescape(&o[..o.find('"').unwrap()]))
        .collect()
}

/// Records of a CSV body (a parser of our own: quotes, doubled quotes, CRLF).
fn csv_records(body: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let (mut record, mut field, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, body.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\r') => {
                assert_eq!(chars.next(), Some('\n'), "lines end with CRLF");
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(
        field.is_empty() && record.is_empty(),
        "the last line ends with CRLF"
    );
    records
}

async fn the_log_filters_and_exports_what_it_shows(db: Db) {
    let app = spawn_app(db).await;
    shop_and_people(&app).await;
    let olga = app.create_user("olga2", Some(("shop", "owner"))).await;
    // A key whose label a spreadsheet would run, a description CSV must quote, a change.
    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &olga,
            json!({"label": "=HYPERLINK(\"x\")"}),
        )
        .await;
    expect_status(r, StatusCode::CREATED).await;
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/orders.create",
            &olga,
            Some(json!({"rate": 0.2, "description": "checkout, \"main\"\nline two", "version": 1})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;
    app.create_policy(json!({"name": "o1", "owner_app": "other", "rate": 1, "max_permits": 1}))
        .await;
    let mut admin = app.sign_in_as_admin().await;

    // The page: diffs in the form's units, keys by label, lists to choose from.
    let page = admin.get("/audit").await;
    page.assert_status(StatusCode::OK);
    assert!(
        page.has("<del>600 per minute</del>"),
        "rate in one unit: {}",
        page.body
    );
    assert!(page.has("<ins>12 per minute</ins>"));
    assert!(
        page.has("API key <strong>=HYPERLINK(&#34;x&#34;)</strong>")
            || page.has("API key <strong>=HYPERLINK(&quot;x&quot;)</strong>"),
        "{}",
        page.body
    );
    assert_eq!(options(&page, "app"), ["other", "shop"]);
    assert!(options(&page, "user").contains(&"olga2".to_owned()));
    assert_eq!(options(&page, "policy"), ["o1", "orders.create"]);

    // Filters by app, user, policy and date.
    let (yesterday, today, tomorrow) = days();
    let all = admin.get("/audit.csv").await;
    all.assert_status(StatusCode::OK);
    assert_eq!(all.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(
        all.header("content-disposition"),
        Some("attachment; filename=\"audit.csv\"")
    );
    let records = csv_records(&all.body);
    assert_eq!(
        records[0],
        [
            "time (UTC)",
            "user",
            "application",
            "entity type",
            "entity",
            "action",
            "changes",
            "before (JSON)",
            "after (JSON)",
            "source",
            "change set"
        ]
    );
    assert!(records[1..].iter().all(|r| r.len() == 11));
    // Newest first (the policy of other), and olga2's change with its quoted description.
    assert_eq!(records[1][4], "o1");
    let change = &records[2];
    assert_eq!(
        (change[1].as_str(), change[4].as_str(), change[5].as_str()),
        ("olga2", "orders.create", "changed")
    );
    assert_eq!(change[9], "api", "{change:?}");
    assert!(
        change[6].contains("rate: 600 per minute → 12 per minute"),
        "{change:?}"
    );
    assert!(
        change[6].contains("description: (empty) → checkout, \"main\"\nline two"),
        "{change:?}"
    );
    // The key's label cannot run as a formula.
    let key = &records[3];
    assert_eq!(
        (key[3].as_str(), key[4].as_str()),
        ("API key", "'=HYPERLINK(\"x\")")
    );

    let rows = |page: &Page| csv_records(&page.body).len() - 1;
    let by_app = admin.get("/audit.csv?app=other").await;
    // The application's creation, otto's membership and its policy.
    assert_eq!(rows(&by_app), 3);
    assert!(
        csv_records(&by_app.body)[1..]
            .iter()
            .all(|r| r[2] == "other")
    );
    assert!(
        by_app
            .header("content-disposition")
            .unwrap()
            .contains("audit-other.csv")
    );
    let by_user = csv_records(&admin.get("/audit.csv?user=olga2").await.body);
    assert_eq!(by_user.len() - 1, 2);
    assert!(by_user[1..].iter().all(|r| r[1] == "olga2"));
    let by_policy = csv_records(&admin.get("/audit.csv?policy=orders.create").await.body);
    assert!(
        by_policy[1..]
            .iter()
            .all(|r| r[3] == "policy" && r[4] == "orders.create")
    );
    assert_eq!(by_policy.len() - 1, 2, "created and changed");
    assert_eq!(
        rows(
            &admin
                .get(&format!("/audit.csv?from={today}&to={today}"))
                .await
        ),
        records.len() - 1
    );
    assert_eq!(
        rows(&admin.get(&format!("/audit.csv?to={yesterday}")).await),
        0
    );
    assert_eq!(
        rows(&admin.get(&format!("/audit.csv?from={tomorrow}")).await),
        0
    );

    // The page takes the same filters.
    let page = admin
        .get(&format!("/audit?user=olga2&from={today}&to={today}"))
        .await;
    assert!(page.has("<option value=\"olga2\" selected>"));
    assert!(page.has(&format!("value=\"{today}\"")));
    assert!(!page.has("<strong>o1</strong>"));
    assert!(
        admin
            .get(&format!("/audit?to={yesterday}"))
            .await
            .has("No event matches these filters.")
    );

    // Bad values: a sentence, 400, on the page and the export alike.
    for (query, says) in [
        ("from=yesterday", "The From date must be a date"),
        ("page=two", "The page must be a whole number"),
        ("app=Not+A+Slug", "No application could be called"),
        ("from=2026-11-02&to=2026-11-01", "is after the To date"),
    ] {
        for path in ["/audit", "/audit.csv"] {
            let page = admin.get(&format!("{path}?{query}")).await;
            page.assert_status(StatusCode::BAD_REQUEST);
            assert!(page.has(says), "{path}?{query}: {}", page.body);
            assert!(!page.has("deserialize"), "{}", page.body);
        }
    }

    // A viewer of shop chooses among shop's events only, and exports only those.
    let mut vic = app.sign_in("vic").await;
    let page = vic.get("/audit").await;
    assert_eq!(options(&page, "app"), ["shop"]);
    assert_eq!(options(&page, "policy"), ["orders.create"]);
    let theirs = csv_records(&vic.get("/audit.csv").await.body);
    assert!(theirs[1..].iter().all(|r| r[2] == "shop"), "{theirs:?}");
    assert!(vic.get("/audit.csv?app=other").await.body.lines().count() == 1);
}
on_every_backend!(
    audit_filters_and_csv,
    the_log_filters_and_exports_what_it_shows
);
