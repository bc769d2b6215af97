//! What a console page costs does not grow with what it shows: the same number of SQL
//! statements and calls to Redis with 2 policies as with 40. Counted by the server's own metrics
//! (`ratekeeper_sql_statements_total{client="control"}`,
//! `ratekeeper_redis_calls_total{client="control"}`), which the background tasks do not
//! add to.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

const PAGES: [&str; 16] = [
    "/apps",
    "/apps/shop",
    "/apps/shop/policies.yaml",
    "/policy-files/apply",
    "/apps/shop/delete",
    "/apps/shop/live",
    "/policies/p0",
    "/policies/p0/overview",
    "/policies/p0/edit",
    "/apps/shop/policies/new",
    "/policies/keyed/overview?key=ann",
    "/policies/p0/history",
    "/audit",
    "/audit.csv?app=shop",
    "/users",
    "/account",
];

/// (SQL statements, Redis calls) of each page, for an app with `policies` policies (and
/// a twentieth as many other applications, which the policy form lists; few enough that
/// the audit log stays one page, whose cost is its own question).
async fn costs_with(policies: usize) -> BTreeMap<&'static str, (f64, f64)> {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    for i in 0..policies {
        app.create_policy(json!({"name": format!("p{i}"), "owner_app": "shop",
                                 "rate": 1, "max_permits": 10}))
            .await;
        if i % 20 == 19 {
            app.create_app(&format!("other{i}")).await;
        }
    }
    // As many versions of p0 as there are policies: its history grows with them too.
    for version in 1..=policies {
        let r = app
            .send(
                "PATCH",
                "/api/v1/policies/p0",
                &app.admin_token,
                Some(json!({"max_permits": 10 + version, "version": version})),
            )
            .await;
        expect_status(r, StatusCode::OK).await;
    }
    app.create_policy(
        json!({"name": "keyed", "owner_app": "shop", "scope": "per_key",
                             "rate": 1, "max_permits": 10}),
    )
    .await;
    let mut admin = app.sign_in_as_admin().await;
    let sql = r#"ratekeeper_sql_statements_total{client="control"}"#;
    let redis = r#"ratekeeper_redis_calls_total{client="control"}"#;
    let read = |name: &'static str| {
        let app = &app;
        async move { app.metric(name).await.unwrap_or(0.0) }
    };
    let mut costs = BTreeMap::new();
    for page in PAGES {
        // Once before measuring: a first visit may warm what later ones reuse.
        admin.get(page).await.assert_status(StatusCode::OK);
        let (sql_before, redis_before) = (read(sql).await, read(redis).await);
        admin.get(page).await.assert_status(StatusCode::OK);
        let (sql_after, redis_after) = (read(sql).await, read(redis).await);
        costs.insert(page, (sql_after - sql_before, redis_after - redis_before));
    }
    costs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_costs_the_same_whatever_it_shows() {
    let few = costs_with(2).await;
    let many = costs_with(40).await;
    eprintln!("page: (SQL statements, Redis calls) with 2 and 40 policies");
    for page in PAGES {
        eprintln!("{page}: {:?} {:?}", few[page], many[page]);
    }
    assert_eq!(few, many, "a page's cost grew with the policies it shows");
    // An application's live refresh reads every policy's state and counts in one call of
    // one script; its page makes that call and reads the application's own counts (which
    // hold what no policy does: acquires naming none); a policy's page reads its state,
    // usage and top callers in one pipeline.
    assert_eq!(many["/apps/shop"].1, 2.0, "/apps/shop: Redis calls");
    for page in [
        "/apps/shop/live",
        "/policies/p0",
        "/policies/keyed/overview?key=ann",
    ] {
        assert_eq!(many[page].1, 1.0, "{page}: Redis calls");
    }
}
