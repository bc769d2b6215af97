//! Signing in through an OpenID Connect provider (the test's own, `LocalProvider`): the
//! round trip, and every bad return refused with the sign-in page saying why: a state not
//! begun here (or used twice), an expired token, a token signed by someone else, a
//! disabled user, a name a local user has; the groups claim making an admin; passwords
//! switched off.

use ratekeeper::auth::Actor;
use ratekeeper::config::Settings;
use ratekeeper::control::UserFlags;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};
use url::Url;

use crate::helpers::*;

const ADMINS: &str = "rk-admins";

fn with_provider(settings: Settings, provider: &LocalProvider) -> Settings {
    Settings {
        oidc_issuer: Some(provider.issuer.clone()),
        oidc_client_id: Some(CLIENT_ID.into()),
        oidc_client_secret: Some(SecretString::from(CLIENT_SECRET)),
        oidc_admin_group: Some(ADMINS.into()),
        oidc_name: "Acme SSO".into(),
        ..settings
    }
}

async fn app_with(provider: &LocalProvider, passwords: bool) -> TestApp {
    let db = fresh_database(Db::Sqlite).await;
    let mut settings = with_provider(settings(&db, &redis_url(), &test_prefix("oidc")), provider);
    settings.password_sign_in = passwords;
    spawn_app_with(settings).await
}

/// A sign-in begun: the browser sent to the provider; its state and PKCE challenge.
struct Begun {
    state: String,
    nonce: String,
    challenge: String,
}

async fn begin(app: &TestApp, browser: &mut Browser, next: &str) -> Begun {
    let page = browser.get(&format!("/login/oidc?next={next}")).await;
    page.assert_status(StatusCode::SEE_OTHER);
    let to = Url::parse(page.location().unwrap()).unwrap();
    let param = |name: &str| {
        to.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| panic!("no {name} in {to}"))
    };
    assert_eq!(param("response_type"), "code");
    assert_eq!(param("client_id"), CLIENT_ID);
    assert_eq!(param("redirect_uri"), app.url("/login/oidc/callback"));
    assert_eq!(param("code_challenge_method"), "S256");
    Begun {
        state: param("state"),
        nonce: param("nonce"),
        challenge: param("code_challenge"),
    }
}

fn claims(
    provider: &LocalProvider,
    begun: &Begun,
    sub: &str,
    name: &str,
    groups: &[&str],
) -> Value {
    let now = chrono::Utc::now().timestamp();
    json!({"iss": provider.issuer, "sub": sub, "aud": CLIENT_ID, "iat": now, "exp": now + 300,
           "nonce": begun.nonce, "preferred_username": name, "groups": groups})
}

/// The browser back from the provider with `code` for `state`.
async fn come_back(browser: &mut Browser, code: &str, state: &str) -> Page {
    browser
        .get(&format!("/login/oidc/callback?code={code}&state={state}"))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_with_the_provider_and_its_groups_claim_makes_them_admin() {
    let provider = LocalProvider::start().await;
    let app = app_with(&provider, true).await;
    let mut browser = app.browser();
    let login = browser.get("/login").await;
    assert!(login.has("id=\"oidc-sign-in\"") && login.has("Sign in with Acme SSO"));
    assert!(login.has("id=\"login-form\""), "passwords stay beside it");

    let begun = begin(&app, &mut browser, "/users").await;
    provider.authorize(
        "code-1",
        &begun.challenge,
        claims(&provider, &begun, "sub-dana", "Dana", &[ADMINS]),
        Signer::Published,
    );
    let back = come_back(&mut browser, "code-1", &begun.state).await;
    back.assert_redirect("/users");
    let users = browser.get("/users").await;
    users.assert_status(StatusCode::OK);
    assert!(users.has("dana"), "made at the first sign-in");

    // The same subject again, no longer in the group: the same user, no longer an admin.
    let mut again = app.browser();
    let begun = begin(&app, &mut again, "/apps").await;
    provider.authorize(
        "code-2",
        &begun.challenge,
        claims(&provider, &begun, "sub-dana", "renamed-at-idp", &[]),
        Signer::Published,
    );
    come_back(&mut again, "code-2", &begun.state)
        .await
        .assert_redirect("/apps");
    again
        .get("/users")
        .await
        .assert_status(StatusCode::FORBIDDEN);
    let created: Vec<Value> = app.audit("?user=dana").await;
    assert!(
        created
            .iter()
            .any(|e| e["action"] == "create" && e["entity_id"] == "dana"),
        "{created:?}"
    );

    // A state used once is used up: the same return again is refused.
    let mut replay = app.browser();
    let page = come_back(&mut replay, "code-2", &begun.state).await;
    page.assert_status(StatusCode::BAD_REQUEST);
    assert!(
        page.alert().unwrap().contains("not begun here"),
        "{:?}",
        page.alert()
    );
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_return_is_refused_with_the_sign_in_page_saying_why() {
    let provider = LocalProvider::start().await;
    let app = app_with(&provider, true).await;

    // A state this server never gave.
    let mut browser = app.browser();
    begin(&app, &mut browser, "/apps").await;
    let page = come_back(&mut browser, "code-x", "forged-state").await;
    page.assert_status(StatusCode::BAD_REQUEST);
    assert!(page.alert().unwrap().contains("not begun here"));
    assert!(
        page.has("id=\"oidc-sign-in\""),
        "with the button to start over"
    );

    // An expired token.
    let begun = begin(&app, &mut browser, "/apps").await;
    let mut old = claims(&provider, &begun, "sub-erin", "erin", &[]);
    let now = chrono::Utc::now().timestamp();
    old["iat"] = json!(now - 7200);
    old["exp"] = json!(now - 3600);
    provider.authorize("code-old", &begun.challenge, old, Signer::Published);
    let page = come_back(&mut browser, "code-old", &begun.state).await;
    page.assert_status(StatusCode::UNAUTHORIZED);
    assert!(
        page.alert().unwrap().contains("expired"),
        "{:?}",
        page.alert()
    );

    // A token signed by someone else under the provider's key name.
    let begun = begin(&app, &mut browser, "/apps").await;
    provider.authorize(
        "code-forged",
        &begun.challenge,
        claims(&provider, &begun, "sub-erin", "erin", &[]),
        Signer::Foreign,
    );
    let page = come_back(&mut browser, "code-forged", &begun.state).await;
    page.assert_status(StatusCode::UNAUTHORIZED);
    assert!(
        page.alert().unwrap().contains("signature"),
        "{:?}",
        page.alert()
    );

    // A token of another sign-in (its nonce).
    let begun = begin(&app, &mut browser, "/apps").await;
    let mut other = claims(&provider, &begun, "sub-erin", "erin", &[]);
    other["nonce"] = json!("someone else's");
    provider.authorize("code-nonce", &begun.challenge, other, Signer::Published);
    let page = come_back(&mut browser, "code-nonce", &begun.state).await;
    page.assert_status(StatusCode::UNAUTHORIZED);
    assert!(
        page.alert().unwrap().contains("nonce"),
        "{:?}",
        page.alert()
    );

    // The provider's own refusal, passed on.
    let begun = begin(&app, &mut browser, "/apps").await;
    let page = browser
        .get(&format!(
            "/login/oidc/callback?error=access_denied&error_description=no+thanks&state={}",
            begun.state
        ))
        .await;
    page.assert_status(StatusCode::UNAUTHORIZED);
    assert!(
        page.alert().unwrap().contains("access_denied (no thanks)"),
        "{:?}",
        page.alert()
    );

    // A provider user named like a local user is not that user, until an operator links
    // the two, as the page says how.
    let begun = begin(&app, &mut browser, "/apps").await;
    provider.authorize(
        "code-admin",
        &begun.challenge,
        claims(&provider, &begun, "sub-mallory", "admin", &[]),
        Signer::Published,
    );
    let page = come_back(&mut browser, "code-admin", &begun.state).await;
    page.assert_status(StatusCode::FORBIDDEN);
    let alert = page.alert().unwrap();
    assert!(
        alert.contains("already exists and is not linked"),
        "{alert}"
    );
    assert!(
        alert.contains("ratekeeper user link-oidc admin sub-mallory"),
        "{alert}"
    );
    app.create_user("olga", None).await;
    let core = app.core().await;
    core.control
        .link_oidc_user(&Actor::operator(), "olga", "sub-olga")
        .await
        .unwrap();
    let mut olga = app.browser();
    let begun = begin(&app, &mut olga, "/apps").await;
    provider.authorize(
        "code-olga",
        &begun.challenge,
        claims(&provider, &begun, "sub-olga", "olga.at.idp", &[]),
        Signer::Published,
    );
    come_back(&mut olga, "code-olga", &begun.state)
        .await
        .assert_redirect("/apps");
    assert!(olga.get("/account").await.has("olga"));

    // A disabled user.
    let begun = begin(&app, &mut browser, "/apps").await;
    provider.authorize(
        "code-erin",
        &begun.challenge,
        claims(&provider, &begun, "sub-erin", "erin", &[]),
        Signer::Published,
    );
    come_back(&mut browser, "code-erin", &begun.state)
        .await
        .assert_redirect("/apps");
    app.core()
        .await
        .control
        .set_user_flags(
            &Actor::operator(),
            "erin",
            UserFlags {
                is_admin: false,
                disabled: true,
            },
        )
        .await
        .unwrap();
    let mut later = app.browser();
    let begun = begin(&app, &mut later, "/apps").await;
    provider.authorize(
        "code-erin-2",
        &begun.challenge,
        claims(&provider, &begun, "sub-erin", "erin", &[]),
        Signer::Published,
    );
    let page = come_back(&mut later, "code-erin-2", &begun.state).await;
    page.assert_status(StatusCode::FORBIDDEN);
    assert!(
        page.alert().unwrap().contains("disabled"),
        "{:?}",
        page.alert()
    );
    assert!(!later.is_signed_in().await);
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_passwords_switched_off_only_the_provider_signs_people_in() {
    let provider = LocalProvider::start().await;
    let app = app_with(&provider, false).await;
    let mut browser = app.browser();
    let login = browser.get("/login").await;
    assert!(login.has("id=\"oidc-sign-in\""));
    assert!(!login.has("id=\"login-form\""), "{}", login.body);
    let csrf = browser
        .cookie("rk_login_csrf")
        .expect("the form's cookie")
        .to_owned();
    let refused = browser
        .post_raw(
            "/login",
            &[
                ("username", "admin"),
                ("password", PASSWORD),
                ("csrf", csrf.as_str()),
                ("next", "/apps"),
            ],
        )
        .await;
    refused.assert_status(StatusCode::FORBIDDEN);
    assert!(
        refused
            .alert()
            .unwrap()
            .contains("Passwords are switched off")
    );
    provider.stop().await;
}

#[test]
fn passwords_cannot_be_switched_off_without_a_provider() {
    let mut alone = settings("sqlite://unused.db", "redis://127.0.0.1:6379", "unused");
    alone.password_sign_in = false;
    let refused = alone.validate().expect_err("nobody could sign in");
    assert!(
        refused.to_string().contains("password_sign_in"),
        "{refused}"
    );
    let mut half = settings("sqlite://unused.db", "redis://127.0.0.1:6379", "unused");
    half.oidc_issuer = Some("https://id.example.com".into());
    let refused = half.validate().expect_err("issuer without a client");
    assert!(refused.to_string().contains("go together"), "{refused}");
    // Behind every address, the provider needs to be told where browsers come back.
    let mut everywhere = settings("sqlite://unused.db", "redis://127.0.0.1:6379", "unused");
    everywhere.listen = "0.0.0.0:8080".into();
    everywhere.oidc_issuer = Some("https://id.example.com".into());
    everywhere.oidc_client_id = Some(CLIENT_ID.into());
    everywhere.oidc_client_secret = Some(SecretString::from(CLIENT_SECRET));
    let refused = everywhere.validate().expect_err("no public URL");
    assert!(refused.to_string().contains("public_url"), "{refused}");
    everywhere.public_url = Some("https://ratekeeper.example.com".into());
    assert!(everywhere.validate().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beginning_sign_ins_is_limited_like_password_attempts() {
    let provider = LocalProvider::start().await;
    let app = app_with(&provider, true).await;
    let mut browser = app.browser();
    let mut statuses = Vec::new();
    for _ in 0..12 {
        statuses.push(browser.get("/login/oidc?next=/apps").await.status);
    }
    // Ten a name and address (the password's rule), then one every 30 s.
    assert!(
        statuses[..10].iter().all(|s| *s == StatusCode::SEE_OTHER),
        "{statuses:?}"
    );
    assert_eq!(statuses[11], StatusCode::TOO_MANY_REQUESTS);
    let page = browser.get("/login/oidc?next=/apps").await;
    assert!(
        page.alert().unwrap().contains("Too many sign-in attempts"),
        "{:?}",
        page.alert()
    );
    assert!(page.header("retry-after").is_some());
    provider.stop().await;
}
