//! Simultaneous requests: all answered, and changes serialised, never lost.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{admin_reads, minimal_policy, patch, visible_apps};
use crate::helpers::*;

/// One test of `$body` on one backend: `[run]`, or `[ignore "bug: ..."]` for a story the
/// backend gets wrong today, so that it runs again with `--include-ignored` once fixed.
macro_rules! backend_test {
    ($body:path, $test:ident, $db:ident, [run]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            $body(Db::$db).await
        }
    };
    ($body:path, $test:ident, $db:ident, [ignore $bug:literal]) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = $bug]
        async fn $test() {
            $body(Db::$db).await
        }
    };
}

/// Like `on_every_backend!`, saying per backend whether the test runs or is ignored.
macro_rules! on_backends {
    ($name:ident, $body:path, sqlite: $s:tt, postgres: $p:tt, mysql: $m:tt) => {
        mod $name {
            use super::*;
            backend_test!($body, sqlite, Sqlite, $s);
            backend_test!($body, postgres, Postgres, $p);
            backend_test!($body, mysql, MySql, $m);
        }
    };
}

/// Several clients at the same moment, as behind any load balancer: every request is
/// answered, none with a 5xx.
async fn simultaneous_requests_are_all_answered(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;

    // Fresh tokens, each used by four requests at once (the first use records itself).
    for n in 0..3 {
        let token = app
            .create_user(&format!("user{n}"), Some(("shop", "viewer")))
            .await;
        let (a, b, c, d) = tokio::join!(
            app.get("/api/v1/apps", &token),
            app.get("/api/v1/apps/shop", &token),
            app.get("/api/v1/policies?app=shop", &token),
            app.get("/api/v1/audit", &token),
        );
        for r in [a, b, c, d] {
            expect_status(r, StatusCode::OK).await;
        }
    }

    // Three applications created at once.
    let create = |slug: &str| {
        app.post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": slug, "name": slug}),
        )
    };
    let (a, b, c) = tokio::join!(create("blog"), create("wiki"), create("mail"));
    for r in [a, b, c] {
        expect_status(r, StatusCode::CREATED).await;
    }
    assert_eq!(
        visible_apps(&app, &app.admin_token).await,
        ["blog", "mail", "shop", "wiki"]
    );
}
on_backends!(
    simultaneous_requests,
    simultaneous_requests_are_all_answered,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);

/// Three clients change one policy from the version they all saw, `rounds` times; the
/// statuses and bodies of each round.
async fn race_for_the_same_version(app: &TestApp, rounds: i64) -> Vec<Vec<(StatusCode, Value)>> {
    let path = "/api/v1/policies/orders.create";
    let mut results = Vec::new();
    for round in 1..=rounds {
        let body = |n: i64| json!({"max_permits": 100 * round + n, "version": round});
        let (a, b, c) = tokio::join!(
            patch(app, path, &app.admin_token, body(1)),
            patch(app, path, &app.admin_token, body(2)),
            patch(app, path, &app.admin_token, body(3)),
        );
        let mut answers = Vec::new();
        for r in [a, b, c] {
            let status = r.status();
            let text = r.text().await.unwrap();
            answers.push((
                status,
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            ));
        }
        results.push(answers);
    }
    results
}

async fn simultaneous_changes_are_serialised_never_lost(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let rounds = 8;

    // With the version they saw: one wins each round, the others hear of the conflict.
    for (round, answers) in race_for_the_same_version(&app, rounds)
        .await
        .iter()
        .enumerate()
    {
        let statuses: Vec<StatusCode> = answers.iter().map(|(s, _)| *s).collect();
        assert!(
            answers
                .iter()
                .all(|(s, _)| *s == StatusCode::OK || *s == StatusCode::CONFLICT),
            "round {round}: {answers:?}"
        );
        let wins = statuses.iter().filter(|s| **s == StatusCode::OK).count();
        assert_eq!(wins, 1, "round {round}: {answers:?}");
    }

    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["version"], rounds + 1);
    assert_eq!(
        app.audit("?policy=orders.create").await.len() as i64,
        rounds + 1,
        "one event per applied change, none for refused ones"
    );
}
on_backends!(
    simultaneous_changes,
    simultaneous_changes_are_serialised_never_lost,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);

async fn simultaneous_changes_without_a_version_all_apply(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    let path = "/api/v1/policies/orders.create";

    // Clients that send no version ask for no check: each change applies, one after the
    // other, and none is lost.
    for round in 0..10 {
        let (a, b) = tokio::join!(
            patch(
                &app,
                path,
                &app.admin_token,
                json!({"description": format!("d{round}")})
            ),
            patch(
                &app,
                path,
                &app.admin_token,
                json!({"max_permits": 30 + round})
            ),
        );
        expect_status(a, StatusCode::OK).await;
        expect_status(b, StatusCode::OK).await;
        let policy = admin_reads(&app, path).await;
        assert_eq!(policy["version"], 3 + 2 * round);
        assert_eq!(policy["description"], format!("d{round}"));
        assert_eq!(policy["max_permits"], 30 + round);
    }
}
on_backends!(
    simultaneous_unversioned_changes,
    simultaneous_changes_without_a_version_all_apply,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);

async fn a_lost_race_reports_the_version_now_current(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;

    // The loser of a round is told the winner's version, so that its retry can succeed.
    for (round, answers) in race_for_the_same_version(&app, 8).await.iter().enumerate() {
        let now_current = round as i64 + 2;
        for (status, body) in answers {
            if *status == StatusCode::CONFLICT {
                assert_eq!(
                    body["current_version"], now_current,
                    "round {round}: {body}"
                );
            } else {
                assert_eq!(*status, StatusCode::OK, "round {round}: {body}");
                assert_eq!(body["version"], now_current);
            }
        }
    }
}
on_backends!(
    lost_race_version,
    a_lost_race_reports_the_version_now_current,
    sqlite: [run],
    postgres: [run],
    mysql: [run]
);
