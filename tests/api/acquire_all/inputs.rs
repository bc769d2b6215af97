//! Bad `all` calls are problems naming the item: `all[i]` for duplicates and refused
//! items, `all[i].permits` and `all[i].key` for their fields, `all` for its size; and the
//! OpenAPI document lists `all`, checks and refunds.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_call_names_its_item() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    app.create_app("other").await;
    app.create_policy(policy("a", "token_bucket", "global", 3))
        .await;
    app.create_policy(policy("k", "sliding_window", "per_key", 3))
        .await;
    let mut theirs = policy("theirs", "token_bucket", "global", 3);
    theirs["owner_app"] = json!("other");
    app.create_policy(theirs).await;
    let invalid = |items: Vec<Value>, field: &'static str| {
        let app = &app;
        let shop = &shop;
        async move {
            let r = acquire_all(app, shop, items).await;
            let problem = expect_problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
            assert_eq!(problem["field"], field, "{problem}");
            problem
        }
    };
    invalid(vec![], "all").await;
    invalid(
        (0..17).map(|i| item(&format!("p{i}"), 1, None)).collect(),
        "all",
    )
    .await;
    let problem = invalid(
        vec![
            item("k", 1, Some("x")),
            item("a", 1, None),
            item("k", 2, Some("x")),
        ],
        "all[2]",
    )
    .await;
    assert!(
        problem["detail"].as_str().unwrap().contains("all[0]"),
        "{problem}"
    );
    invalid(vec![item("a", 1, None), item("a", 4, None)], "all[1]").await;
    let problem = invalid(
        vec![item("k", 1, Some("x")), item("a", 4, None)],
        "all[1].permits",
    )
    .await;
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("max_permits (3)"),
        "{problem}"
    );
    invalid(vec![item("a", -1, None)], "all[0].permits").await;
    invalid(vec![item("a", 1_000_000_001, None)], "all[0].permits").await;
    invalid(vec![item("a", 1, None), item("k", 1, None)], "all[1].key").await;
    invalid(vec![item("a", 1, Some(""))], "all[0].key").await;
    let both = app
        .post(
            "/v1/acquire",
            &shop,
            json!({"resource": "a", "all": [item("a", 1, None)]}),
        )
        .await;
    assert_eq!(
        expect_problem(both, StatusCode::UNPROCESSABLE_ENTITY).await["field"],
        "all"
    );

    let r = acquire_all(
        &app,
        &shop,
        vec![item("a", 1, None), item("nothing", 1, None)],
    )
    .await;
    let problem = expect_problem(r, StatusCode::NOT_FOUND).await;
    assert_eq!(problem["detail"], "all[1]: no policy named \"nothing\"");
    let r = acquire_all(&app, &shop, vec![item("theirs", 1, None)]).await;
    let problem = expect_problem(r, StatusCode::FORBIDDEN).await;
    assert!(
        problem["detail"].as_str().unwrap().starts_with("all[0]: "),
        "{problem}"
    );
    let r = app
        .post("/v1/acquire", &shop, json!({"all": [{"permits": 1}]}))
        .await;
    assert_eq!(
        expect_problem(r, StatusCode::BAD_REQUEST).await["field"],
        "all[0].resource"
    );
    // Nothing was taken by any of them.
    assert!(same(permits_now(&app, "a", "global").await, 3.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_lists_all_checks_and_refunds() {
    let app = spawn_app(Db::Sqlite).await;
    let doc: Value = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemas = &doc["components"]["schemas"];
    let all = &schemas["AcquireRequest"]["properties"]["all"];
    assert_eq!(
        (all["minItems"].clone(), all["maxItems"].clone()),
        (json!(1), json!(16)),
        "{all}"
    );
    assert_eq!(
        schemas["AcquireRequest"]["properties"]["permits"]["minimum"],
        0
    );
    assert_eq!(
        schemas["AllItemRequest"]["properties"]["permits"]["minimum"],
        0
    );
    assert_eq!(
        schemas["RefundRequest"]["properties"]["permits"]["minimum"],
        1
    );
    assert_eq!(
        schemas["RefundRequest"]["properties"]["permits"]["maximum"],
        1_000_000_000
    );
    assert!(doc["paths"]["/v1/refund"]["post"].is_object());
    assert!(schemas["AcquireAllReply"]["properties"]["results"].is_object());
}
