//! Acquiring, whatever the algorithm: three grants, then 429s, all with the same reply.

use std::collections::BTreeSet;

use reqwest::StatusCode;

use super::{
    DAY_MS, field_names, for_each_algorithm, is_lease_id, names, shop_with_key, three_permits,
};
use crate::helpers::*;

/// The fields of an acquire's reply, the same for every algorithm.
const REPLY_FIELDS: [&str; 6] = [
    "allowed",
    "remaining",
    "limit",
    "retry_after_ms",
    "reset_after_ms",
    "policy_version",
];

async fn three_grants_then_429_with_the_same_reply(algorithm: &str) {
    let app = spawn_app(Db::Sqlite).await;
    let key = shop_with_key(&app).await;
    app.create_policy(three_permits("limited", algorithm)).await;

    // More than the policy ever allows at once.
    let problem = expect_problem(
        app.acquire(&key, "limited", 4).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    )
    .await;
    assert_eq!(problem["field"], "permits");

    let mut leases = BTreeSet::new();
    for remaining in [2, 1, 0] {
        let r = app.acquire(&key, "limited", 1).await;
        assert_eq!(r.headers()["ratelimit-policy"], "\"limited\";q=3");
        let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert!(r.headers().get("retry-after").is_none());
        let body = expect_status(r, StatusCode::OK).await;
        let mut shape = names(&REPLY_FIELDS);
        if algorithm == "concurrency" {
            shape.insert("lease_id".to_owned());
            let lease = body["lease_id"].as_str().unwrap();
            assert!(is_lease_id(lease), "32 hex digits: {lease}");
            leases.insert(lease.to_owned());
        }
        assert_eq!(field_names(&body), shape, "{body}");
        assert_eq!(body["allowed"], true);
        assert_eq!(body["remaining"], remaining, "{body}");
        assert_eq!(body["limit"], 3);
        assert_eq!(body["retry_after_ms"], 0);
        assert_eq!(body["policy_version"], 1);
        let reset = body["reset_after_ms"].as_i64().unwrap();
        assert!(reset > 0, "{body}");
        assert_eq!(
            ratelimit,
            format!("\"limited\";r={remaining};t={}", (reset + 999) / 1000)
        );
    }
    if algorithm == "concurrency" {
        assert_eq!(leases.len(), 3, "every lease has its own id");
    }

    for _ in 0..2 {
        let r = app.acquire(&key, "limited", 1).await;
        let retry_after = r.headers()["retry-after"].to_str().unwrap().to_owned();
        let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert_eq!(r.headers()["ratelimit-policy"], "\"limited\";q=3");
        let body = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
        assert_eq!(field_names(&body), names(&REPLY_FIELDS), "{body}");
        assert_eq!(body["allowed"], false);
        assert_eq!(body["remaining"], 0);
        assert_eq!(body["limit"], 3);
        assert_eq!(body["policy_version"], 1);
        let retry = body["retry_after_ms"].as_i64().unwrap();
        assert!((1..=2 * DAY_MS).contains(&retry), "{body}");
        let seconds = (retry + 999) / 1000;
        assert_eq!(
            retry_after,
            seconds.to_string(),
            "whole seconds, rounded up"
        );
        assert_eq!(ratelimit, format!("\"limited\";r=0;t={seconds}"));
        assert!(body["reset_after_ms"].as_i64().unwrap() > 0, "{body}");
    }
}
for_each_algorithm!(
    three_grants_then_429,
    three_grants_then_429_with_the_same_reply
);
