//! `permits: 0` is a check: whether one permit would be granted now, with the remaining
//! permits and reset times, taking nothing; alone or as an item of `all`.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_takes_nothing_on_every_algorithm() {
    let app = spawn_app(Db::Sqlite).await;
    let shop = shop(&app).await;
    for algorithm in ALGORITHMS {
        for scope in ["global", "per_key"] {
            let name = format!("{scope}.{algorithm}");
            app.create_policy(policy(&name, algorithm, scope, 2)).await;
            let key = key_of(scope);
            let check = || {
                let mut body = json!({"resource": name, "permits": 0});
                if let Some(key) = key {
                    body["key"] = json!(key);
                }
                app.post("/v1/acquire", &shop, body)
            };
            for _ in 0..3 {
                let r = check().await;
                assert!(r.headers().get("ratelimit").is_some(), "{name}");
                let body = expect_status(r, StatusCode::OK).await;
                assert_eq!(body["allowed"], true, "{name}: {body}");
                assert_eq!(body["remaining"], 2, "{name}: {body}");
                assert!(body.get("lease_id").is_none(), "{name}: {body}");
            }
            assert!(same(permits_now(&app, &name, scope).await, 2.0), "{name}");
            // Emptied: the check is denied, with when to come back, and still takes nothing.
            let r = acquire_all(&app, &shop, vec![item(&name, 2, key)]).await;
            expect_status(r, StatusCode::OK).await;
            let r = check().await;
            let body = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
            assert_eq!(body["remaining"], 0, "{name}: {body}");
            assert!(
                body["retry_after_ms"].as_i64().unwrap() > 0,
                "{name}: {body}"
            );
            let r = acquire_all(&app, &shop, vec![item(&name, 0, key)]).await;
            let body = expect_status(r, StatusCode::TOO_MANY_REQUESTS).await;
            assert_eq!(body["results"][0]["allowed"], false, "{name}: {body}");
            assert!(same(permits_now(&app, &name, scope).await, 0.0), "{name}");
        }
    }
}
