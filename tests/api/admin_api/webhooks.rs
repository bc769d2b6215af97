//! Webhooks: owners make, rotate and delete them, viewers see them (never a secret); a
//! receiver on a private address is refused unless the operator allows it; a policy's
//! change is written for the webhooks that listen, with its audit record.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::refused_without_trace;
use super::{admin_reads, delete, expect_invalid, minimal_policy, newest_event, observe};
use crate::helpers::*;
use crate::on_every_backend;

const HOOKS: &str = "/api/v1/apps/shop/webhooks";

async fn owners_make_webhooks_viewers_see_them_and_never_their_secret(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let owner = app.create_user("olga", Some(("shop", "owner"))).await;
    let viewer = app.create_user("vera", Some(("shop", "viewer"))).await;

    let r = app
        .post(
            HOOKS,
            &owner,
            json!({"url": "http://127.0.0.1:9/hooks", "events": ["policy.changed", "policy.denying"],
                   "quiet_period_s": 60}),
        )
        .await;
    let created = expect_status(r, StatusCode::CREATED).await;
    let secret = created["secret"].as_str().unwrap();
    assert!(secret.starts_with("whsec_"), "secret {secret:?}");
    assert_eq!(
        created["events"],
        json!(["policy.denying", "policy.changed"])
    );
    assert_eq!(created["format"], "json");
    assert_eq!(created["quiet_period_s"], 60);
    assert_eq!(created["near_limit_below"], 0.1);
    assert_eq!(created["created_by"], "olga");
    let id = created["id"].as_str().unwrap();

    // A viewer sees it, its secret nowhere; nor in the audit record.
    let listed = expect_status(app.get(HOOKS, &viewer).await, StatusCode::OK).await;
    assert_eq!(listed[0]["id"], id);
    assert_eq!(listed[0]["url"], "http://127.0.0.1:9/hooks");
    assert_eq!(listed[0]["deliveries"], json!([]));
    assert!(!listed.to_string().contains(secret));
    let event = newest_event(&app).await;
    assert_eq!(
        (&event["entity_type"], &event["action"], &event["actor"]),
        (&json!("webhook"), &json!("create"), &json!("olga"))
    );
    assert!(!event.to_string().contains(secret));

    // A viewer makes, rotates and deletes nothing.
    let before = observe(&app, &[HOOKS]).await;
    let body = json!({"url": "http://127.0.0.1:9/other", "events": ["policy.changed"]});
    let r = app.post(HOOKS, &viewer, body).await;
    refused_without_trace(&app, before, &[HOOKS], r, StatusCode::FORBIDDEN).await;
    let before = observe(&app, &[HOOKS]).await;
    let r = app
        .post(&format!("{HOOKS}/{id}/rotate-secret"), &viewer, json!({}))
        .await;
    refused_without_trace(&app, before, &[HOOKS], r, StatusCode::FORBIDDEN).await;
    let before = observe(&app, &[HOOKS]).await;
    let r = delete(&app, &format!("{HOOKS}/{id}"), &viewer).await;
    refused_without_trace(&app, before, &[HOOKS], r, StatusCode::FORBIDDEN).await;

    // Someone who is not a member does not learn the application exists.
    let stranger = app.create_user("sam", None).await;
    expect_problem(app.get(HOOKS, &stranger).await, StatusCode::NOT_FOUND).await;

    // The rotation shows the new secret once; the old one still signs for a day.
    let r = app
        .post(&format!("{HOOKS}/{id}/rotate-secret"), &owner, json!({}))
        .await;
    let rotated = expect_status(r, StatusCode::OK).await;
    let new_secret = rotated["secret"].as_str().unwrap();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);
    assert!(rotated["previous_secret_until"].is_string(), "{rotated}");
    assert_eq!(newest_event(&app).await["action"], "rotate_secret");

    let r = delete(&app, &format!("{HOOKS}/{id}"), &owner).await;
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert_eq!(admin_reads(&app, HOOKS).await, json!([]));
    let r = delete(&app, &format!("{HOOKS}/{id}"), &owner).await;
    expect_problem(r, StatusCode::NOT_FOUND).await;
    assert_eq!(newest_event(&app).await["action"], "delete");
}
on_every_backend!(
    owners_make_webhooks_viewers_see_them_and_never_their_secret,
    owners_make_webhooks_viewers_see_them_and_never_their_secret
);

/// What a webhook with `url` gets as an answer from an app that does not allow private
/// receivers.
async fn made_with(app: &TestApp, url: &str) -> reqwest::Response {
    app.post(
        HOOKS,
        &app.admin_token,
        json!({"url": url, "events": ["policy.denying"]}),
    )
    .await
}

#[tokio::test]
async fn a_receiver_on_a_loopback_or_private_address_is_refused_unless_allowed() {
    let db = fresh_database(Db::Sqlite).await;
    let mut guarded = settings(&db, &redis_url(), &test_prefix("hooks"));
    guarded.webhook_allow_private = false;
    let app = spawn_app_with(guarded).await;
    app.create_app("shop").await;
    for (url, address) in [
        ("http://127.0.0.1:8080/x", "127.0.0.1"),
        ("http://10.1.2.3/x", "10.1.2.3"),
        ("http://192.168.0.10/x", "192.168.0.10"),
        ("http://169.254.169.254/latest/meta-data", "169.254.169.254"),
        ("http://[::1]:9/x", "::1"),
        ("http://[::ffff:10.0.0.1]/x", "::ffff:10.0.0.1"),
        ("https://localhost/x", "localhost"),
    ] {
        let problem = expect_invalid(made_with(&app, url).await, "url").await;
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains(address) && detail.contains("RATEKEEPER_WEBHOOK_ALLOW_PRIVATE"),
            "{url}: {detail}"
        );
    }
    assert_eq!(admin_reads(&app, HOOKS).await, json!([]));

    // The same receivers are taken where the operator allows them (the tests' default).
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let r = made_with(&app, "http://127.0.0.1:8080/x").await;
    expect_status(r, StatusCode::CREATED).await;
}

#[tokio::test]
async fn every_bad_field_of_a_webhook_is_named_at_once() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let r = app
        .post(
            HOOKS,
            &app.admin_token,
            json!({"url": "ftp://example.com/x", "events": ["policy.denied"], "format": "xml",
                   "quiet_period_s": 0, "near_limit_below": 1.5}),
        )
        .await;
    let problem = expect_invalid(r, "url").await;
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "url",
            "events",
            "format",
            "quiet_period_s",
            "near_limit_below"
        ]
    );
    assert!(
        problem.to_string().contains("policy.near_limit"),
        "{problem}"
    );
    for (body, field) in [
        (json!({"events": ["policy.changed"]}), "url"),
        (json!({"url": "http://127.0.0.1:9/x"}), "events"),
        (
            json!({"url": "http://127.0.0.1:9/x", "events": []}),
            "events",
        ),
        (
            json!({"url": "http://user:pw@127.0.0.1:9/x", "events": ["policy.changed"]}),
            "url",
        ),
    ] {
        expect_invalid(app.post(HOOKS, &app.admin_token, body).await, field).await;
    }
    let r = app
        .post(
            HOOKS,
            &app.admin_token,
            json!({"url": "http://127.0.0.1:9/x", "events": ["policy.changed"], "colour": "red"}),
        )
        .await;
    expect_invalid(r, "colour").await;
    assert_eq!(admin_reads(&app, HOOKS).await, json!([]));
}

/// The deliveries of the `hook`th webhook as the admin lists them, once the newest has
/// `attempts` attempts (or after a minute, for the assertion to show them).
async fn deliveries_once(app: &TestApp, hook: usize, attempts: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let listed = admin_reads(app, HOOKS).await;
        let found = listed[hook]["deliveries"].as_array().unwrap().clone();
        let done = found
            .first()
            .is_some_and(|d| d["attempts"].as_array().unwrap().len() >= attempts);
        if done || std::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_policy_change_is_sent_to_the_webhooks_that_listen_for_it(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    let receiver = Receiver::start(0).await;
    let listening = json!({"url": receiver.url, "events": ["policy.changed"]});
    let hook = expect_status(
        app.post(HOOKS, &app.admin_token, listening).await,
        StatusCode::CREATED,
    )
    .await;
    let deaf = json!({"url": receiver.url, "events": ["policy.denying"]});
    expect_status(
        app.post(HOOKS, &app.admin_token, deaf).await,
        StatusCode::CREATED,
    )
    .await;

    app.create_policy(minimal_policy("checkout", "shop")).await;
    let got = receiver.wait_for(1, Duration::from_secs(60)).await;
    let body = got[0].json();
    assert_eq!(body["type"], "policy.changed");
    assert_eq!(body["data"]["application"], "shop");
    assert_eq!(body["data"]["policy"], "checkout");
    assert_eq!(body["data"]["actor"], "admin");
    assert_eq!(body["data"]["action"], "create");
    assert_eq!(body["data"]["after"]["max_permits"], 20);
    assert_eq!(body["data"]["link"], app.url("/policies/checkout"));
    assert_eq!(
        got[0].header("webhook-id").len(),
        20,
        "{:?}",
        got[0].headers
    );
    assert!(got[0].header("webhook-signature").starts_with("v1,"));

    // The log shows it delivered, on the webhook that listens and no other.
    let deliveries = deliveries_once(&app, 0, 1).await;
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0]["id"], got[0].header("webhook-id"));
    assert_eq!(deliveries[0]["event"], "policy.changed");
    assert_eq!(deliveries[0]["state"], "delivered");
    assert_eq!(deliveries[0]["attempts"][0]["status"], 200);
    assert_eq!(deliveries[0]["attempts"][0]["excerpt"], "thanks");
    let listed = admin_reads(&app, HOOKS).await;
    assert_eq!(listed[0]["id"], hook["id"]);
    assert_eq!(listed[1]["deliveries"], json!([]));
    assert_eq!(receiver.received().len(), 1);
    receiver.stop().await;
}
on_every_backend!(
    a_policy_change_is_sent_to_the_webhooks_that_listen_for_it,
    a_policy_change_is_sent_to_the_webhooks_that_listen_for_it
);

#[tokio::test]
async fn a_receiver_that_fails_twice_gets_the_same_event_again_and_the_log_shows_each_attempt() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("checkout", 0.001, 1).await;
    let receiver = Receiver::start(2).await;
    let body = json!({"url": receiver.url, "events": ["policy.denying"], "format": "json"});
    let hook = expect_status(
        app.post(HOOKS, &app.admin_token, body).await,
        StatusCode::CREATED,
    )
    .await;

    assert_eq!(
        app.acquire(&key, "checkout", 1).await.status(),
        StatusCode::OK
    );
    for _ in 0..3 {
        let r = app.acquire(&key, "checkout", 1).await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    }
    let got = receiver.wait_for(3, Duration::from_secs(120)).await;
    assert_eq!(
        got.iter().map(|r| r.answered).collect::<Vec<_>>(),
        [500, 500, 200]
    );
    // One event: the same id and body at every attempt.
    let id = got[0].header("webhook-id");
    assert!(got.iter().all(|r| r.header("webhook-id") == id));
    assert!(got.iter().all(|r| r.body == got[0].body));
    let event = got[0].json();
    assert_eq!(event["type"], "policy.denying");
    assert_eq!(event["data"]["application"], "shop");
    assert_eq!(event["data"]["policy"], "checkout");
    assert!(event["data"]["since"].is_string());

    let deliveries = deliveries_once(&app, 0, 3).await;
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    let attempts = deliveries[0]["attempts"].as_array().unwrap();
    let statuses: Vec<&Value> = attempts.iter().map(|a| &a["status"]).collect();
    assert_eq!(statuses, [&json!(500), &json!(500), &json!(200)]);
    assert_eq!(attempts[0]["excerpt"], "receiver down for a moment");
    assert_eq!(deliveries[0]["state"], "delivered");

    // Send again: a fourth attempt of the same event.
    let path = format!(
        "{HOOKS}/{}/deliveries/{}/send-again",
        hook["id"].as_str().unwrap(),
        deliveries[0]["id"].as_str().unwrap()
    );
    let r = app.post(&path, &app.admin_token, json!({})).await;
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    let got = receiver.wait_for(4, Duration::from_secs(60)).await;
    assert_eq!(got[3].header("webhook-id"), id);
    assert_eq!(got.len(), 4);
    receiver.stop().await;
}

#[tokio::test]
async fn a_policy_near_its_limit_is_told_once_in_slacks_text_format() {
    let app = spawn_app(Db::Sqlite).await;
    let key = app.shop_with_policy("upload", 0.001, 10).await;
    let receiver = Receiver::start(0).await;
    let body = json!({"url": receiver.url, "events": ["policy.near_limit"], "format": "slack",
                      "near_limit_below": 0.5});
    expect_status(
        app.post(HOOKS, &app.admin_token, body).await,
        StatusCode::CREATED,
    )
    .await;

    // 4 of 10 left: under half.
    assert_eq!(
        app.acquire(&key, "upload", 6).await.status(),
        StatusCode::OK
    );
    let got = receiver.wait_for(1, Duration::from_secs(60)).await;
    let text = got[0].json();
    assert_eq!(text.as_object().unwrap().len(), 1, "{text}");
    let text = text["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "ratekeeper: policy `upload` of `shop` is near its limit: 4 of 10 permits left."
        ),
        "{text}"
    );
    assert!(text.ends_with(&format!(
        "<{}|Open the policy>",
        app.url("/policies/upload")
    )));
    assert!(got[0].header("webhook-signature").starts_with("v1,"));

    // Still near: nothing more, however many looks pass (the log shows the one event).
    assert_eq!(
        app.acquire(&key, "upload", 1).await.status(),
        StatusCode::OK
    );
    let deliveries = deliveries_once(&app, 0, 1).await;
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0]["event"], "policy.near_limit");
    assert_eq!(deliveries[0]["data"]["capacity"], 10);
    receiver.stop().await;
}

#[tokio::test]
async fn a_receiver_that_never_answers_is_given_up_on_at_the_timeout_and_tried_again() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    let hanging = HangingReceiver::start().await;
    let receiver = Receiver::start(0).await;
    for url in [&hanging.url, &receiver.url] {
        let body = json!({"url": url, "events": ["policy.changed"]});
        expect_status(
            app.post(HOOKS, &app.admin_token, body).await,
            StatusCode::CREATED,
        )
        .await;
    }
    app.create_policy(minimal_policy("checkout", "shop")).await;

    // The healthy receiver has its event while the other holds its request.
    receiver.wait_for(1, Duration::from_secs(60)).await;
    // The hanging one's attempt ends at the send's timeout: no status, why, and a retry.
    let deliveries = deliveries_once(&app, 0, 1).await;
    let attempt = &deliveries[0]["attempts"][0];
    assert_eq!(attempt["status"], Value::Null, "{attempt}");
    let error = attempt["error"].as_str().unwrap();
    assert!(
        error.contains("10 s") || error.contains("timed out"),
        "{error}"
    );
    assert_eq!(deliveries[0]["state"], "pending");
    assert!(deliveries[0]["next_attempt_at"].is_string());
    receiver.stop().await;
}
