//! The audit log: one event per change, written in the change's own transaction; filters,
//! pages, and who sees which events.

use reqwest::StatusCode;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::{delete, minimal_policy, new_key, newest_event, observe, patch, put};
use crate::helpers::*;
use crate::on_every_backend;

async fn every_change_leaves_one_audit_event(db: Db) {
    let app = spawn_app(db).await;
    let start = newest_event(&app).await["id"].as_i64().unwrap();
    app.create_app("shop").await;
    app.create_user("olga", None).await;
    let owner_token_event = newest_event(&app).await["id"].as_i64().unwrap();
    let admin = app.admin_token.clone();

    put(
        &app,
        "/api/v1/apps/shop/members/olga",
        &admin,
        json!({"role": "owner"}),
    )
    .await;
    let (key_id, _) = new_key(&app, "shop", &admin).await;
    expect_status(
        delete(&app, &format!("/api/v1/apps/shop/keys/{key_id}"), &admin).await,
        StatusCode::NO_CONTENT,
    )
    .await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &admin,
        json!({"rate": 2}),
    )
    .await;
    delete(&app, "/api/v1/policies/orders.create", &admin).await;
    delete(&app, "/api/v1/apps/shop/members/olga", &admin).await;

    let events = app.audit("").await;
    let newer: Vec<&Value> = events
        .iter()
        .filter(|e| e["id"].as_i64().unwrap() > owner_token_event)
        .collect();
    let summary: Vec<(&str, &str, &str)> = newer
        .iter()
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
                e["entity_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("member", "delete", "olga"),
            ("policy", "delete", "orders.create"),
            ("policy", "update", "orders.create"),
            ("policy", "create", "orders.create"),
            ("api_key", "revoke", key_id.as_str()),
            ("api_key", "create", key_id.as_str()),
            ("member", "create", "olga"),
        ],
        "newest first, one per change"
    );
    for e in &newer {
        assert_eq!(e["actor"], "admin");
        assert_eq!(e["app"], "shop");
        assert!(chrono::DateTime::parse_from_rfc3339(e["at"].as_str().unwrap()).is_ok());
        match e["action"].as_str().unwrap() {
            "create" => assert!(e["before"].is_null() && e["after"].is_object(), "{e}"),
            "delete" | "revoke" => assert!(e["before"].is_object() && e["after"].is_null(), "{e}"),
            _ => assert!(e["before"].is_object() && e["after"].is_object(), "{e}"),
        }
    }
    let update = newer[2];
    assert_eq!(update["before"]["rate"], json!(10.0));
    assert_eq!(update["after"]["rate"], json!(2.0));

    // The app itself, the user and their token were audited earlier, in order.
    let earlier: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| {
            let id = e["id"].as_i64().unwrap();
            id > start && id <= owner_token_event
        })
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        earlier,
        [
            ("access_token", "create"),
            ("user", "create"),
            ("app", "create")
        ]
    );
}
on_every_backend!(audit_trail, every_change_leaves_one_audit_event);

async fn the_audit_log_filters_by_policy_app_and_user(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_policy(minimal_policy("orders.refund", "shop"))
        .await;
    app.create_policy(minimal_policy("posts.publish", "blog"))
        .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"rate": 3}),
    )
    .await;
    patch(
        &app,
        "/api/v1/policies/orders.create",
        &owner,
        json!({"rate": 4}),
    )
    .await;

    let by_policy = app.audit("?policy=orders.create").await;
    let summary: Vec<(&str, &str)> = by_policy
        .iter()
        .map(|e| (e["actor"].as_str().unwrap(), e["action"].as_str().unwrap()))
        .collect();
    assert_eq!(
        summary,
        [("olga", "update"), ("olga", "update"), ("admin", "create")]
    );
    assert!(
        by_policy
            .iter()
            .all(|e| e["entity_type"] == "policy" && e["entity_id"] == "orders.create")
    );
    assert_eq!(by_policy[0]["after"]["rate"], json!(4.0));
    assert_eq!(by_policy[0]["before"]["rate"], json!(3.0));

    let by_app = app.audit("?app=blog").await;
    let summary: Vec<(&str, &str)> = by_app
        .iter()
        .map(|e| {
            (
                e["entity_type"].as_str().unwrap(),
                e["entity_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, [("policy", "posts.publish"), ("app", "blog")]);

    let by_user = app.audit("?user=olga").await;
    assert_eq!(by_user.len(), 2);
    assert!(by_user.iter().all(|e| e["actor"] == "olga"));

    // Filters combine.
    assert_eq!(app.audit("?app=blog&user=olga").await, Vec::<Value>::new());
    assert_eq!(
        app.audit("?app=shop&policy=orders.create&user=admin")
            .await
            .len(),
        1
    );
    // An empty filter is no filter.
    assert_eq!(app.audit("?app=&user=").await, app.audit("").await);
}
on_every_backend!(audit_filters, the_audit_log_filters_by_policy_app_and_user);

async fn the_audit_log_pages_fifty_at_a_time(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    for i in 0..55 {
        let r = patch(
            &app,
            "/api/v1/policies/orders.create",
            &app.admin_token,
            json!({"description": format!("edit {i}")}),
        )
        .await;
        expect_status(r, StatusCode::OK).await;
    }

    let page1 = app.audit("?policy=orders.create").await;
    let page1_again = app.audit("?policy=orders.create&page=1").await;
    let page2 = app.audit("?policy=orders.create&page=2").await;
    let page3 = app.audit("?policy=orders.create&page=3").await;
    assert_eq!(page1, page1_again);
    assert_eq!(page1.len(), 50);
    assert_eq!(page2.len(), 6, "55 updates and the create");
    assert!(page3.is_empty());

    let ids =
        |page: &[Value]| -> Vec<i64> { page.iter().map(|e| e["id"].as_i64().unwrap()).collect() };
    let (ids1, ids2) = (ids(&page1), ids(&page2));
    assert!(ids1.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(ids2.windows(2).all(|w| w[0] > w[1]), "newest first");
    assert!(
        ids1.last().unwrap() > ids2.first().unwrap(),
        "disjoint, page 2 older"
    );
    assert_eq!(page1[0]["after"]["description"], "edit 54");
    assert_eq!(page2.last().unwrap()["action"], "create");

    // Paging without a filter holds every event once.
    let all1 = app.audit("").await;
    let all2 = app.audit("?page=2").await;
    assert_eq!(all1.len(), 50);
    assert!(!all2.is_empty());
    assert!(ids(&all1).iter().all(|id| !ids(&all2).contains(id)));
}
on_every_backend!(audit_pages, the_audit_log_pages_fifty_at_a_time);

async fn members_see_only_the_audit_events_of_their_applications(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_app("blog").await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_policy(minimal_policy("posts.publish", "blog"))
        .await;
    patch(
        &app,
        "/api/v1/policies/posts.publish",
        &app.admin_token,
        json!({"rate": 1}),
    )
    .await;

    let events = expect_status(app.get("/api/v1/audit", &viewer).await, StatusCode::OK).await;
    let events = events.as_array().unwrap();
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e["app"] == "shop"), "{events:?}");
    assert!(events.iter().any(|e| e["entity_id"] == "orders.create"));

    // Asking for blog's events explicitly yields nothing either.
    for query in ["?app=blog", "?policy=posts.publish", "?user=admin&app=blog"] {
        let r = app.get(&format!("/api/v1/audit{query}"), &viewer).await;
        assert_eq!(expect_status(r, StatusCode::OK).await, json!([]), "{query}");
    }

    // A user of no application sees no event at all.
    let outsider = app.create_user("otto", None).await;
    let r = app.get("/api/v1/audit", &outsider).await;
    assert_eq!(expect_status(r, StatusCode::OK).await, json!([]));
}
on_every_backend!(
    audit_visibility,
    members_see_only_the_audit_events_of_their_applications
);

async fn a_bad_audit_page_is_400(db: Db) {
    let app = spawn_app(db).await;
    for query in ["?page=abc", "?page=-1", "?page=1.5"] {
        let r = app
            .get(&format!("/api/v1/audit{query}"), &app.admin_token)
            .await;
        let problem = expect_problem(r, StatusCode::BAD_REQUEST).await;
        assert!(
            problem["type"].as_str().unwrap().ends_with(":malformed"),
            "{query}"
        );
        // Without a valid token the answer is 401, whatever the query says.
        let r = app
            .get(&format!("/api/v1/audit{query}"), "rk_pat_wrong")
            .await;
        expect_problem(r, StatusCode::UNAUTHORIZED).await;
    }
}
on_every_backend!(bad_audit_page, a_bad_audit_page_is_400);

/// Makes every insert into `audit_events` fail, with a trigger of the backend's own kind:
/// the SQL connection that installed it, to take it away again.
async fn refuse_audit_events(app: &TestApp, db: Db) -> sqlx::AnyConnection {
    use sqlx::Connection;
    let url = app.settings.database_url.expose_secret();
    let mut sql = sqlx::AnyConnection::connect(url).await.unwrap();
    let statements: &[&str] = match db {
        Db::Sqlite => &["CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events \
             BEGIN SELECT RAISE(ABORT, 'audit refused'); END"],
        Db::Postgres => &[
            "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$",
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events \
             FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
        ],
        Db::MySql => &["CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events \
             FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'audit refused'"],
    };
    for statement in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*statement))
            .execute(&mut sql)
            .await
            .expect("the trigger is installed");
    }
    sql
}

async fn allow_audit_events(sql: &mut sqlx::AnyConnection, db: Db) {
    let statement = match db {
        Db::Postgres => "DROP TRIGGER refuse_audit ON audit_events",
        Db::Sqlite | Db::MySql => "DROP TRIGGER refuse_audit",
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
        .execute(sql)
        .await
        .unwrap();
}

/// The number of rows of each table a change of the admin API writes to.
async fn row_counts(sql: &mut sqlx::AnyConnection) -> Vec<(&'static str, i64)> {
    let mut counts = Vec::new();
    for table in [
        "apps",
        "memberships",
        "api_keys",
        "policies",
        "audit_events",
    ] {
        let query = format!("SELECT COUNT(*) FROM {table}");
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(query))
            .fetch_one(&mut *sql)
            .await
            .unwrap();
        counts.push((table, n));
    }
    counts
}

/// Everything of a policy in Redis: its hash, field by field.
async fn redis_hash(app: &TestApp, key: &str) -> std::collections::BTreeMap<String, String> {
    let mut conn = app.redis.clone();
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// A change and its audit event are one transaction: when the event cannot be written,
/// the change is answered with a 5xx and nothing of it is left, in SQL or in Redis. Once
/// events can be written again, the same changes go through (nothing half-written, such
/// as a slug or name already taken, stands in their way).
async fn a_change_whose_audit_event_fails_leaves_nothing(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", None).await;
    let (key_id, key) = new_key(&app, "shop", &app.admin_token).await;
    app.create_policy(minimal_policy("kept", "shop")).await;
    let admin = app.admin_token.clone();
    let views = ["/api/v1/apps", "/api/v1/apps/shop", "/api/v1/policies"];
    let before = observe(&app, &views).await;
    let kept_in_redis = redis_hash(&app, &app.policy_key("kept")).await;
    assert!(!kept_in_redis.is_empty());

    let mut sql = refuse_audit_events(&app, db).await;
    let rows = row_counts(&mut sql).await;
    let keys_path = "/api/v1/apps/shop/keys";
    let revoke_path = format!("{keys_path}/{key_id}");
    let changes = [
        (
            "create a policy",
            app.post(
                "/api/v1/policies",
                &admin,
                minimal_policy("orders.create", "shop"),
            )
            .await,
        ),
        (
            "create an app",
            app.post(
                "/api/v1/apps",
                &admin,
                json!({"slug": "blog", "name": "Blog"}),
            )
            .await,
        ),
        (
            "create a key",
            app.post(keys_path, &admin, json!({"label": "refused"}))
                .await,
        ),
        (
            "add a member",
            put(
                &app,
                "/api/v1/apps/shop/members/olga",
                &admin,
                json!({"role": "owner"}),
            )
            .await,
        ),
        (
            "change a policy",
            patch(
                &app,
                "/api/v1/policies/kept",
                &admin,
                json!({"max_permits": 7}),
            )
            .await,
        ),
        (
            "delete a policy",
            delete(&app, "/api/v1/policies/kept", &admin).await,
        ),
        ("revoke a key", delete(&app, &revoke_path, &admin).await),
    ];
    for (what, response) in changes {
        let status = response.status();
        let body = response.text().await.unwrap();
        assert!(status.is_server_error(), "{what}: {status} {body}");
    }

    assert_eq!(
        row_counts(&mut sql).await,
        rows,
        "no row written or removed"
    );
    assert_eq!(
        observe(&app, &views).await,
        before,
        "the admin sees no change"
    );
    assert!(!app.redis_exists(&app.policy_key("orders.create")).await);
    assert_eq!(
        redis_hash(&app, &app.policy_key("kept")).await,
        kept_in_redis,
        "the kept policy is neither changed nor deleted in Redis"
    );
    // The instance's own memory agrees: the unknown policy is unknown, the key still works.
    expect_problem(
        app.acquire(&key, "orders.create", 1).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_status(app.acquire(&key, "kept", 1).await, StatusCode::OK).await;

    allow_audit_events(&mut sql, db).await;
    app.create_policy(minimal_policy("orders.create", "shop"))
        .await;
    app.create_app("blog").await;
    expect_status(
        app.post(keys_path, &admin, json!({"label": "ok"})).await,
        StatusCode::CREATED,
    )
    .await;
    let r = put(
        &app,
        "/api/v1/apps/shop/members/olga",
        &admin,
        json!({"role": "owner"}),
    )
    .await;
    expect_status(r, StatusCode::OK).await;
    let r = patch(
        &app,
        "/api/v1/policies/kept",
        &admin,
        json!({"max_permits": 7}),
    )
    .await;
    assert_eq!(expect_status(r, StatusCode::OK).await["version"], 2);
    let r = delete(&app, &revoke_path, &admin).await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    let r = delete(&app, "/api/v1/policies/kept", &admin).await;
    expect_status(r, StatusCode::NO_CONTENT).await;
    let written = row_counts(&mut sql).await;
    assert_eq!(
        written.last(),
        Some(&("audit_events", rows.last().unwrap().1 + 7)),
        "one event for each of the seven changes"
    );
}
on_every_backend!(
    audit_in_the_same_transaction,
    a_change_whose_audit_event_fails_leaves_nothing
);
