//! An application's webhooks in the console: an owner adds one (every error at once, next
//! to its field), sees its secret once, reads the delivery log and sends a delivery again;
//! a viewer reads the page without a control.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::*;

const PAGE: &str = "/apps/shop/webhooks";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_adds_a_webhook_sees_its_secret_once_and_sends_a_delivery_again() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_user("vera", Some(("shop", "viewer"))).await;
    let receiver = Receiver::start(0).await;
    let mut owner = app.sign_in("olga").await;

    let shop = owner.get("/apps/shop").await;
    assert!(shop.has("href=\"/apps/shop/webhooks\""));
    let page = owner.get(PAGE).await;
    page.assert_status(StatusCode::OK);
    // The form starts with the episode events ticked and the defaults filled in.
    let form = page.form(PAGE);
    for (field, value) in [
        ("denying", "on"),
        ("recovered", "on"),
        ("quiet_period_s", "300"),
        ("near_limit_percent", "10"),
        ("format", "json"),
    ] {
        assert!(
            form.contains(&(field.to_owned(), value.to_owned())),
            "{field}: {form:?}"
        );
    }

    // Every error at once, each next to its field; nothing made.
    let wrong = owner
        .post_form(
            PAGE,
            &[
                ("url", "http://user:pw@example.com/x"),
                ("quiet_period_s", "soon"),
                ("near_limit_percent", "x"),
                ("format", "json"),
            ],
        )
        .await;
    wrong.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    for error in ["webhook-quiet-error", "webhook-near-error"] {
        assert!(
            wrong.has(&format!("id=\"{error}\"")),
            "{error}: {}",
            wrong.body
        );
    }
    assert_eq!(wrong.field(PAGE, "quiet_period_s").as_deref(), Some("soon"));
    let wrong = owner
        .post_form(
            PAGE,
            &[
                ("url", "ftp://example.com/x"),
                ("quiet_period_s", "300"),
                ("near_limit_percent", "10"),
                ("format", "json"),
            ],
        )
        .await;
    wrong.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    for error in ["webhook-url-error", "webhook-events-error"] {
        assert!(
            wrong.has(&format!("id=\"{error}\"")),
            "{error}: {}",
            wrong.body
        );
    }
    assert!(owner.get(PAGE).await.has("No webhook yet"));

    let made = owner
        .submit(&page, PAGE, &[("url", &receiver.url), ("changed", "on")])
        .await;
    made.assert_redirect(&format!("{PAGE}#new-secret"));
    let shown = owner.get(PAGE).await;
    let secret = shown
        .text_of("new-secret-value-1")
        .expect("the secret, once");
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert!(shown.has(&receiver.url));
    assert!(!owner.get(PAGE).await.has(&secret), "shown once only");

    // A change is sent; the log shows the attempt, and Send again sends it once more.
    app.create_policy(
        json!({"name": "checkout", "owner_app": "shop", "rate": 1, "max_permits": 5}),
    )
    .await;
    receiver.wait_for(1, Duration::from_secs(60)).await;
    let mut log = owner.get(PAGE).await;
    for _ in 0..600 {
        if log.has("data-attempt=\"1\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        log = owner.get(PAGE).await;
    }
    assert!(
        log.has("policy.changed") && log.has("<strong>200</strong>"),
        "{}",
        log.body
    );
    assert!(log.has("href=\"/policies/checkout\""));
    let again = log
        .form_tags()
        .into_iter()
        .find(|tag| tag.contains("/send-again"))
        .expect("a Send again form");
    let action = again
        .split("action=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let sent = owner.post_form(&action, &[]).await;
    assert!(
        sent.location()
            .unwrap()
            .starts_with(&format!("{PAGE}?done=webhook-sent-again"))
    );
    let got = receiver.wait_for(2, Duration::from_secs(60)).await;
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));

    // A viewer reads the log, without a control, and cannot post one.
    let mut viewer = app.sign_in("vera").await;
    let read = viewer.get(PAGE).await;
    read.assert_status(StatusCode::OK);
    assert!(read.has(&receiver.url) && read.has("policy.changed"));
    assert!(
        read.form_tags().iter().all(|t| !t.contains("/webhooks")),
        "{:?}",
        read.form_tags()
    );
    let refused = viewer
        .post_form(
            PAGE,
            &[
                ("url", &receiver.url),
                ("changed", "on"),
                ("quiet_period_s", "300"),
                ("near_limit_percent", "10"),
                ("format", "json"),
            ],
        )
        .await;
    refused.assert_status(StatusCode::FORBIDDEN);
    receiver.stop().await;
}
