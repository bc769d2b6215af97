//! The web console over HTTP, as a browser uses it (DESIGN.md section 6): signing in and
//! out, sessions and CSRF, roles enforced on the server, escaping, the policy forms, keys,
//! users, the account, the audit log and the live state. A refused change must change
//! nothing: each refusal is checked against what the admin reads through the JSON API,
//! the users table and the number of audit events, before and after.

use std::time::Duration;

use ratekeeper::auth::Actor;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::*;
use crate::on_every_backend;

// ---------------------------------------------------------------------------------------
// Helpers of this module
// ---------------------------------------------------------------------------------------

/// Everything a refused console request could have changed, as the admin sees it.
#[derive(Debug, PartialEq)]
struct Snapshot {
    apps: Value,
    shop: Value,
    policies: Value,
    /// (username, admin, disabled, password hash) of every user.
    users: Vec<(String, bool, bool, String)>,
    audit_events: usize,
}

async fn snapshot(app: &TestApp) -> Snapshot {
    let read = |path: &'static str| async move {
        expect_status(app.get(path, &app.admin_token).await, StatusCode::OK).await
    };
    let users = users(app).await;
    Snapshot {
        apps: read("/api/v1/apps").await,
        shop: read("/api/v1/apps/shop").await,
        policies: read("/api/v1/policies?app=shop").await,
        users,
        audit_events: app.audit_count().await,
    }
}

/// (username, admin, disabled, password hash) of every user.
async fn users(app: &TestApp) -> Vec<(String, bool, bool, String)> {
    app.core()
        .await
        .control
        .list_users(&Actor::operator())
        .await
        .unwrap()
        .into_iter()
        .map(|u| {
            let (admin, disabled) = (u.is_admin(), u.is_disabled());
            (u.username, admin, disabled, u.password_hash)
        })
        .collect()
}

/// Asserts that the console answered a refused request with `status`.
#[track_caller]
fn assert_refused(what: &str, page: &Page, status: StatusCode) {
    assert_eq!(
        page.status, status,
        "{what}: expected {status}; body: {}",
        page.body
    );
}

/// A refusal with `status`, after which the admin sees everything as `before`.
async fn refused_without_trace(
    app: &TestApp,
    before: &Snapshot,
    what: &str,
    page: Page,
    status: StatusCode,
) {
    assert_refused(what, &page, status);
    assert_eq!(
        &snapshot(app).await,
        before,
        "{what}: a refused request changed something"
    );
}

/// The newest audit event, as the admin sees it.
async fn newest_event(app: &TestApp) -> Value {
    app.audit("").await.into_iter().next().expect("an event")
}

async fn admin_reads(app: &TestApp, path: &str) -> Value {
    expect_status(app.get(path, &app.admin_token).await, StatusCode::OK).await
}

/// The fields of the new-policy form, filled in.
fn policy_fields<'a>(name: &'a str, max_permits: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("name", name),
        ("algorithm", "token_bucket"),
        ("rate", "5"),
        ("rate_unit", "second"),
        ("max_permits", max_permits),
        ("allowed_apps", "shop"),
        ("failure_mode", "closed"),
        ("enabled", "on"),
        ("description", ""),
    ]
}

/// The cast of most stories: applications `shop` (with policy `orders.create` and one
/// API key) and `other`; olga owns shop, vic views it, otto owns other, ulla belongs
/// nowhere. Returns the key's id.
async fn shop_and_people(app: &TestApp) -> String {
    app.create_app("shop").await;
    app.create_app("other").await;
    app.create_policy(json!({
        "name": "orders.create", "owner_app": "shop", "rate": 10, "max_permits": 20
    }))
    .await;
    let r = app
        .post(
            "/api/v1/apps/shop/keys",
            &app.admin_token,
            json!({"label": "checkout"}),
        )
        .await;
    let key = expect_status(r, StatusCode::CREATED).await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    app.create_user("vic", Some(("shop", "viewer"))).await;
    app.create_user("otto", Some(("other", "owner"))).await;
    app.create_user("ulla", None).await;
    key["id"].as_str().unwrap().to_owned()
}

/// Every change an owner of shop may make in the console, as forged POSTs would send
/// them (the CSRF token is added or not by the caller).
fn changes_to_shop(key_id: &str) -> Vec<(String, Vec<(&'static str, &'static str)>)> {
    let mut edit = policy_fields("orders.create", "99");
    edit.push(("version", "1"));
    vec![
        (
            "/apps/shop/policies".to_owned(),
            policy_fields("forged.one", "5"),
        ),
        ("/policies/orders.create/edit".to_owned(), edit),
        ("/policies/orders.create/delete".to_owned(), vec![]),
        (
            "/apps/shop/members".to_owned(),
            vec![("username", "ulla"), ("role", "owner")],
        ),
        ("/apps/shop/members/olga/remove".to_owned(), vec![]),
        ("/apps/shop/keys".to_owned(), vec![("label", "forged")]),
        (format!("/apps/shop/keys/{key_id}/revoke"), vec![]),
    ]
}

/// The pages that only exist to make a change.
const EDIT_PAGES: [&str; 3] = [
    "/apps/shop/policies/new",
    "/policies/orders.create/edit",
    "/policies/orders.create/delete",
];

/// The attributes of a `Set-Cookie` header, lowercased, without the name=value pair.
fn cookie_attributes(set_cookie: &str) -> Vec<String> {
    set_cookie
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect()
}

/// (who, application, what, action) of each row of the audit page, top to bottom.
fn audit_rows(page: &Page) -> Vec<[String; 4]> {
    let Some(start) = page.body.find("<tbody>") else {
        return Vec::new();
    };
    let end = page.body[start..].find("</tbody>").unwrap() + start;
    page.body[start..end]
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let cells: Vec<String> = row
                .split("<td")
                .skip(1)
                .map(|cell| {
                    let open = cell.find('>').unwrap() + 1;
                    let close = cell.find("</td>").unwrap();
                    html_unescape(&cell[open..close])
                })
                .collect();
            [
                cells[1].clone(),
                cells[2].clone(),
                cells[3].clone(),
                cells[4].clone(),
            ]
        })
        .collect()
}

/// The target of the link with this `rel`, if the page has one.
fn link(page: &Page, rel: &str) -> Option<String> {
    let at = page.body.find(&format!("rel=\"{rel}\""))?;
    let tag_start = page.body[..at].rfind("<a ")?;
    let href = page.body[tag_start..].find("href=\"")? + tag_start + "href=\"".len();
    let end = page.body[href..].find('"')? + href;
    Some(html_unescape(&page.body[href..end]))
}

// ---------------------------------------------------------------------------------------
// Signing in and out
// ---------------------------------------------------------------------------------------

async fn a_user_signs_in_and_comes_back_to_the_page_asked_for(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut browser = app.browser();

    // Not signed in: off to the sign-in page, which knows where to come back to.
    browser
        .get("/apps")
        .await
        .assert_redirect("/login?next=/apps");
    browser
        .get("/audit?app=shop")
        .await
        .assert_redirect("/login?next=/audit%3Fapp%3Dshop");

    let form = browser.get("/login?next=%2Faudit%3Fapp%3Dshop").await;
    form.assert_status(StatusCode::OK);
    assert_eq!(
        form.field("/login", "next").as_deref(),
        Some("/audit?app=shop")
    );
    assert!(browser.cookie("rk_login_csrf").is_some());
    let signed_in = browser
        .submit(
            &form,
            "/login",
            &[("username", "olga"), ("password", PASSWORD)],
        )
        .await;
    signed_in.assert_redirect("/audit?app=shop");

    // The session cookie: no script reads it, no other site's POST carries it, and over
    // plain HTTP it is not marked Secure (the browser would drop it).
    let cookie = signed_in
        .set_cookie("rk_session")
        .expect("a session cookie");
    let attributes = cookie_attributes(&cookie);
    assert!(attributes.contains(&"httponly".to_owned()), "{cookie}");
    assert!(attributes.contains(&"samesite=lax".to_owned()), "{cookie}");
    assert!(attributes.contains(&"path=/".to_owned()), "{cookie}");
    assert!(!attributes.contains(&"secure".to_owned()), "{cookie}");
    // The login form's own token is spent.
    assert!(browser.cookie("rk_login_csrf").is_none());

    let apps = browser.get("/apps").await;
    apps.assert_status(StatusCode::OK);
    assert!(apps.has("href=\"/apps/shop\""));
    assert!(apps.has("id=\"logout\""));

    // Signed in, the sign-in page sends the user on.
    browser.get("/login").await.assert_redirect("/apps");

    // Signing out ends the session; the cookie no longer opens anything.
    let cookie = browser.cookie("rk_session").unwrap().to_owned();
    let csrf = browser.session_csrf().await;
    let out = browser.post_with_csrf("/logout", &[], Some(&csrf)).await;
    out.assert_redirect("/login");
    assert!(
        cookie_attributes(&out.set_cookie("rk_session").unwrap()).contains(&"max-age=0".to_owned())
    );
    let mut replay = app.browser();
    replay.set_cookie("rk_session", &cookie);
    replay
        .get("/apps")
        .await
        .assert_redirect("/login?next=/apps");
}
on_every_backend!(
    sign_in,
    a_user_signs_in_and_comes_back_to_the_page_asked_for
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_tls_proxy_the_session_cookie_is_secure() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let mut browser = app.browser();
    browser.behind_tls = true;

    let form = browser.get("/login").await;
    let login_csrf = form.set_cookie("rk_login_csrf").unwrap();
    assert!(cookie_attributes(&login_csrf).contains(&"secure".to_owned()));
    let signed_in = browser.try_sign_in("olga", PASSWORD).await;
    signed_in.assert_redirect("/apps");
    let cookie = signed_in.set_cookie("rk_session").unwrap();
    let attributes = cookie_attributes(&cookie);
    assert!(attributes.contains(&"secure".to_owned()), "{cookie}");
    assert!(attributes.contains(&"httponly".to_owned()), "{cookie}");
    assert!(attributes.contains(&"samesite=lax".to_owned()), "{cookie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_in_gives_a_new_session_id_and_ends_the_old_one() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let first = app.sign_in("olga").await;
    let old = first.cookie("rk_session").unwrap().to_owned();

    // The browser still carries the old cookie (or one an attacker planted in it) when
    // the sign-in form is sent.
    let mut browser = app.browser();
    let form = browser.get("/login").await;
    browser.set_cookie("rk_session", &old);
    let page = browser
        .submit(
            &form,
            "/login",
            &[("username", "olga"), ("password", PASSWORD)],
        )
        .await;
    page.assert_redirect("/apps");
    let new = browser.cookie("rk_session").unwrap().to_owned();
    assert_ne!(new, old, "the session id is renewed at sign-in");
    assert!(browser.is_signed_in().await);

    let mut replay = app.browser();
    replay.set_cookie("rk_session", &old);
    assert!(!replay.is_signed_in().await, "the old session id is dead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_and_an_unknown_user_look_the_same() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    let mut browser = app.browser();
    let wrong_password = browser.try_sign_in("olga", "not her password").await;
    let mut browser = app.browser();
    let unknown_user = browser.try_sign_in("nobody", PASSWORD).await;

    for page in [&wrong_password, &unknown_user] {
        page.assert_status(StatusCode::UNAUTHORIZED);
        assert!(page.set_cookie("rk_session").is_none());
    }
    let message = wrong_password.alert().expect("a message in role=alert");
    assert_eq!(unknown_user.alert().as_deref(), Some(message.as_str()));
    assert!(message.contains("wrong password"), "{message}");
    // The username typed is kept; the password never comes back.
    assert_eq!(
        wrong_password.field("/login", "username").as_deref(),
        Some("olga")
    );
    assert!(!wrong_password.has("not her password"));
    assert!(!browser.is_signed_in().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_without_the_login_forms_token_is_refused() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let credentials = [("username", "olga"), ("password", PASSWORD)];

    // The cookie is missing (a form posted from another site).
    let mut browser = app.browser();
    let form = browser.get("/login").await;
    browser.forget_cookie("rk_login_csrf");
    let page = browser.submit(&form, "/login", &credentials).await;
    assert_refused("no login cookie", &page, StatusCode::FORBIDDEN);
    assert!(page.set_cookie("rk_session").is_none());

    // The field is missing, or is not the cookie's.
    let mut browser = app.browser();
    browser.get("/login").await;
    let page = browser.post_raw("/login", &credentials).await;
    assert_refused("no csrf field", &page, StatusCode::FORBIDDEN);
    let page = browser
        .post_with_csrf("/login", &credentials, Some("rk_ses_made_up"))
        .await;
    assert_refused("wrong csrf field", &page, StatusCode::FORBIDDEN);
    assert!(!browser.is_signed_in().await);

    // The same browser, with the form as served, gets in.
    let mut browser = app.browser();
    browser
        .try_sign_in("olga", PASSWORD)
        .await
        .assert_redirect("/apps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_attempts_are_limited_per_username() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    app.create_user("vic", None).await;

    let mut guesser = app.browser();
    for attempt in 1..=10 {
        let page = guesser
            .try_sign_in("olga", &format!("guess {attempt}"))
            .await;
        assert_refused(&format!("guess {attempt}"), &page, StatusCode::UNAUTHORIZED);
    }

    // The eleventh attempt is refused before the password is even looked at.
    let mut olga = app.browser();
    let page = olga.try_sign_in("olga", PASSWORD).await;
    assert_refused("eleventh attempt", &page, StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = page
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(retry_after >= 1, "Retry-After {retry_after}");
    let message = page.alert().expect("a message");
    assert!(message.contains("Too many sign-in attempts"), "{message}");
    assert!(page.set_cookie("rk_session").is_none());

    // Another user at the same address is not locked out (its limit is 30).
    let mut vic = app.browser();
    vic.try_sign_in("vic", PASSWORD)
        .await
        .assert_redirect("/apps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_needs_the_sessions_csrf_token() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let mut browser = app.sign_in("olga").await;

    let page = browser.post_with_csrf("/logout", &[], None).await;
    assert_refused("logout without csrf", &page, StatusCode::FORBIDDEN);
    let page = browser
        .post_with_csrf("/logout", &[], Some("rk_ses_made_up"))
        .await;
    assert_refused("logout with a wrong csrf", &page, StatusCode::FORBIDDEN);
    assert!(browser.is_signed_in().await, "the session survives");

    browser
        .post_form("/logout", &[])
        .await
        .assert_redirect("/login");
    assert!(!browser.is_signed_in().await);
}

/// Where a sign-in with this `next` (percent-encoded) sends the browser.
async fn sign_in_sends_to(app: &TestApp, next: &str) -> Page {
    let mut browser = app.browser();
    let form = browser.get(&format!("/login?next={next}")).await;
    form.assert_status(StatusCode::OK);
    browser
        .submit(
            &form,
            "/login",
            &[("username", "olga"), ("password", PASSWORD)],
        )
        .await
}

/// A Location a browser resolves to this site: it drops tabs and newlines from a URL
/// first (so `/<TAB>/evil.example` is `//evil.example`, another host).
#[track_caller]
fn assert_same_site(next: &str, page: &Page) {
    page.assert_status(StatusCode::SEE_OTHER);
    let location: String = page
        .location()
        .unwrap()
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    assert!(
        location.starts_with('/') && !location.starts_with("//") && !location.contains('\\'),
        "next={next} sent the browser to {location:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_sends_only_to_pages_of_this_site() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    for next in [
        "%2F%2Fevil.example",
        "https%3A%2F%2Fevil.example",
        "%2F%5Cevil.example",
        "evil.example",
    ] {
        let page = sign_in_sends_to(&app, next).await;
        assert_same_site(next, &page);
        assert_eq!(page.location(), Some("/apps"), "next={next}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tab_in_next_cannot_send_the_browser_to_another_site() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    let next = "%2F%09%2Fevil.example";
    assert_same_site(next, &sign_in_sends_to(&app, next).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_break_in_next_does_not_break_sign_in() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;

    let next = "%2Fapps%0D%0ASet-Cookie%3A%20x%3Dy";
    let page = sign_in_sends_to(&app, next).await;
    assert_same_site(next, &page);
    assert!(page.set_cookie("rk_session").is_some());
}

// ---------------------------------------------------------------------------------------
// Roles, enforced on the server
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewers_forged_changes_are_refused_and_change_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut vic = app.sign_in("vic").await;
    let before = snapshot(&app).await;

    for (path, fields) in changes_to_shop(&key_id) {
        let page = vic.post_form(&path, &fields).await;
        refused_without_trace(&app, &before, &path, page, StatusCode::FORBIDDEN).await;
    }
    for path in EDIT_PAGES {
        let page = vic.get(path).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
    // What the viewer may do still works.
    vic.get("/apps/shop").await.assert_status(StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_of_another_app_cannot_touch_shop() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut otto = app.sign_in("otto").await;
    let before = snapshot(&app).await;

    // The code answers 403 (not 404) for an application that exists.
    for (path, fields) in changes_to_shop(&key_id) {
        let page = otto.post_form(&path, &fields).await;
        refused_without_trace(&app, &before, &path, page, StatusCode::FORBIDDEN).await;
    }
    for path in EDIT_PAGES
        .into_iter()
        .chain(["/apps/shop", "/apps/shop/live"])
    {
        let page = otto.get(path).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_cannot_reach_another_apps_things_through_their_own_app() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    app.create_policy(json!({
        "name": "other.search", "owner_app": "other", "rate": 1, "max_permits": 2
    }))
    .await;
    let r = app
        .post(
            "/api/v1/apps/other/keys",
            &app.admin_token,
            json!({"label": "theirs"}),
        )
        .await;
    let other_key = expect_status(r, StatusCode::CREATED).await;
    let other_key_id = other_key["id"].as_str().unwrap();
    let mut olga = app.sign_in("olga").await;
    let before = snapshot(&app).await;
    let other_before = admin_reads(&app, "/api/v1/apps/other").await;

    // Their key and their member, addressed through shop, are not shop's.
    let page = olga
        .post_form(&format!("/apps/shop/keys/{other_key_id}/revoke"), &[])
        .await;
    refused_without_trace(&app, &before, "their key", page, StatusCode::NOT_FOUND).await;
    let page = olga.post_form("/apps/shop/members/otto/remove", &[]).await;
    refused_without_trace(&app, &before, "their member", page, StatusCode::NOT_FOUND).await;
    // Their policy is refused by its own application.
    for path in [
        "/policies/other.search/edit",
        "/policies/other.search/delete",
    ] {
        let page = olga.get(path).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
        let page = olga
            .post_form(path, &policy_fields("other.search", "1"))
            .await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
    // A policy of shop may not be handed to other either: its owner is not a field.
    let mut fields = policy_fields("sneaky", "1");
    fields.push(("owner_app", "other"));
    olga.post_form("/apps/shop/policies", &fields)
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let sneaky = admin_reads(&app, "/api/v1/policies/sneaky").await;
    assert_eq!(sneaky["owner_app"], "shop");
    assert_eq!(admin_reads(&app, "/api/v1/apps/other").await, other_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_posted_without_signing_in_changes_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let before = snapshot(&app).await;
    let mut stranger = app.browser();

    for (path, fields) in changes_to_shop(&key_id) {
        let page = stranger
            .post_with_csrf(&path, &fields, Some("rk_ses_made_up"))
            .await;
        page.assert_redirect("/login?next=/apps");
        assert_eq!(snapshot(&app).await, before, "{path} changed something");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_form_without_the_right_csrf_token_changes_nothing() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    // A real token, but of another session (vic's).
    let mut vic = app.sign_in("vic").await;
    let vics_token = vic.session_csrf().await;
    let before = snapshot(&app).await;

    for (path, fields) in changes_to_shop(&key_id) {
        for csrf in [None, Some("rk_ses_made_up"), Some(vics_token.as_str())] {
            let page = olga.post_with_csrf(&path, &fields, csrf).await;
            let what = format!("{path} with csrf {csrf:?}");
            refused_without_trace(&app, &before, &what, page, StatusCode::FORBIDDEN).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_admins_manage_applications_and_users() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let before = snapshot(&app).await;

    let forged: [(&str, Vec<(&str, &str)>); 5] = [
        ("/apps", vec![("slug", "mine"), ("name", "Mine")]),
        (
            "/users",
            vec![
                ("username", "mallory"),
                ("password", PASSWORD),
                ("admin", "on"),
            ],
        ),
        ("/users/olga", vec![("role", "admin")]),
        ("/users/vic", vec![("role", "member"), ("disabled", "on")]),
        (
            "/users/vic/password",
            vec![("password", "olga knows it now")],
        ),
    ];
    for (path, fields) in forged {
        let page = olga.post_form(path, &fields).await;
        refused_without_trace(&app, &before, path, page, StatusCode::FORBIDDEN).await;
    }
    let page = olga.get("/users").await;
    refused_without_trace(&app, &before, "GET /users", page, StatusCode::FORBIDDEN).await;
    // The navigation does not offer what is refused.
    assert!(!olga.get("/apps").await.has("href=\"/users\""));

    // An admin may.
    let mut admin = app.sign_in_as_admin().await;
    let apps = admin.get("/apps").await;
    admin
        .submit(&apps, "/apps", &[("slug", "mine"), ("name", "Mine")])
        .await
        .assert_redirect("/apps/mine?done=app-created");
    assert_eq!(admin_reads(&app, "/api/v1/apps/mine").await["name"], "Mine");
    let event = newest_event(&app).await;
    assert_eq!(
        (event["actor"].clone(), event["action"].clone()),
        (json!("admin"), json!("create"))
    );
    let page = admin
        .submit(&apps, "/apps", &[("slug", "Not A Slug"), ("name", "x")])
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"slug-error\""));
    assert_eq!(page.field("/apps", "slug").as_deref(), Some("Not A Slug"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_makes_each_change_and_each_is_audited() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    // Each change: its answer, then what the JSON API and the audit log show.
    async fn audited(app: &TestApp, events_before: usize, entity_type: &str, action: &str) {
        assert_eq!(app.audit_count().await, events_before + 1);
        let event = newest_event(app).await;
        assert_eq!(event["actor"], "olga");
        assert_eq!(event["app"], "shop");
        assert_eq!(event["entity_type"], entity_type);
        assert_eq!(event["action"], action);
    }

    let events = app.audit_count().await;
    olga.post_form("/apps/shop/policies", &policy_fields("search", "5"))
        .await
        .assert_redirect("/apps/shop?done=policy-created");
    let search = admin_reads(&app, "/api/v1/policies/search").await;
    assert_eq!(
        (search["max_permits"].clone(), search["rate"].clone()),
        (json!(5), json!(5.0))
    );
    audited(&app, events, "policy", "create").await;

    let events = app.audit_count().await;
    let form = olga.get("/policies/orders.create/edit").await;
    form.assert_status(StatusCode::OK);
    olga.submit(
        &form,
        "/policies/orders.create/edit",
        &[("max_permits", "99")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["max_permits"], 99);
    assert_eq!(policy["rate"], 10.0, "the rate is kept as it was");
    assert_eq!(policy["version"], 2);
    audited(&app, events, "policy", "update").await;

    let events = app.audit_count().await;
    olga.post_form(
        "/apps/shop/members",
        &[("username", "ulla"), ("role", "viewer")],
    )
    .await
    .assert_redirect("/apps/shop?done=member-saved#members");
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    assert!(
        shop["members"]
            .as_array()
            .unwrap()
            .contains(&json!({"username": "ulla", "role": "viewer"}))
    );
    audited(&app, events, "member", "create").await;

    // Someone who does not exist cannot be added; the form says so.
    let page = olga
        .post_form(
            "/apps/shop/members",
            &[("username", "nobody"), ("role", "viewer")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.alert().unwrap().contains("no user named"));
    // What was typed is kept in the add-member form.
    assert!(page.has("id=\"member-username\" name=\"username\" value=\"nobody\""));

    let events = app.audit_count().await;
    olga.post_form("/apps/shop/members/ulla/remove", &[])
        .await
        .assert_redirect("/apps/shop?done=member-removed#members");
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    assert!(!shop["members"].to_string().contains("ulla"));
    audited(&app, events, "member", "delete").await;

    let events = app.audit_count().await;
    let page = olga.post_form("/apps/shop/keys", &[("label", "")]).await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"label-error\""));
    assert_eq!(app.audit_count().await, events);
    olga.post_form("/apps/shop/keys", &[("label", "batch")])
        .await
        .assert_status(StatusCode::CREATED);
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    assert_eq!(shop["keys"].as_array().unwrap().len(), 2);
    audited(&app, events, "api_key", "create").await;

    let events = app.audit_count().await;
    olga.post_form(&format!("/apps/shop/keys/{key_id}/revoke"), &[])
        .await
        .assert_redirect("/apps/shop?done=key-revoked#keys");
    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    let revoked = shop["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == key_id.as_str())
        .unwrap();
    assert!(revoked["revoked_at"].is_string());
    audited(&app, events, "api_key", "revoke").await;

    let events = app.audit_count().await;
    let confirm = olga.get("/policies/search/delete").await;
    confirm.assert_status(StatusCode::OK);
    olga.submit(&confirm, "/policies/search/delete", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-deleted");
    expect_problem(
        app.get("/api/v1/policies/search", &app.admin_token).await,
        StatusCode::NOT_FOUND,
    )
    .await;
    audited(&app, events, "policy", "delete").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_sees_the_application_without_any_control() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut vic = app.sign_in("vic").await;

    let page = vic.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("data-policy=\"orders.create\""));
    assert!(page.has("data-member=\"olga\""));
    assert!(page.has("<strong>viewer</strong>"));
    for control in ["id=\"new-policy\"", "class=\"edit\"", "class=\"delete\""] {
        assert!(!page.has(control), "a viewer's page has {control}");
    }
    let posting: Vec<String> = page
        .form_tags()
        .into_iter()
        .filter(|tag| tag.contains("method=\"post\""))
        .collect();
    assert_eq!(posting.len(), 1, "forms that post: {posting:?}");
    assert!(posting[0].contains("id=\"logout\""), "{posting:?}");

    // The owner sees the controls on the same page.
    let mut olga = app.sign_in("olga").await;
    let page = olga.get("/apps/shop").await;
    for control in ["id=\"new-policy\"", "class=\"edit\"", "class=\"delete\""] {
        assert!(page.has(control), "an owner's page lacks {control}");
    }
}

// ---------------------------------------------------------------------------------------
// Escaping
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_descriptions_are_shown_escaped() {
    let app = spawn_app(Db::Sqlite).await;
    let hostile = "<script>alert(1)</script> & co";
    let r = app
        .post(
            "/api/v1/apps",
            &app.admin_token,
            json!({"slug": "co", "name": hostile, "description": "\"quoted\" <i>"}),
        )
        .await;
    expect_status(r, StatusCode::CREATED).await;
    app.create_policy(json!({
        "name": "co.search", "owner_app": "co", "rate": 1, "max_permits": 2,
        "description": "<b>bold</b> & \"quoted\""
    }))
    .await;
    let mut admin = app.sign_in_as_admin().await;

    let escaped = |page: &Page, raw: &str| {
        let lt = raw
            .replace('&', "&#38;")
            .replace('<', "&#60;")
            .replace('>', "&#62;");
        let named = raw
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(!page.has(raw), "{raw:?} is on the page raw");
        assert!(
            page.has(&lt) || page.has(&named),
            "{raw:?} is not on the page escaped: {}",
            page.body
        );
    };
    for path in ["/apps", "/apps/co", "/account"] {
        let page = admin.get(path).await;
        page.assert_status(StatusCode::OK);
        escaped(&page, hostile);
    }
    let page = admin.get("/apps/co").await;
    assert!(!page.has("<i>"));

    let form = admin.get("/policies/co.search/edit").await;
    form.assert_status(StatusCode::OK);
    escaped(&form, "<b>bold</b>");
    // What the browser shows (and sends back) is the text as typed.
    assert_eq!(
        form.field("/policies/co.search/edit", "description")
            .as_deref(),
        Some("<b>bold</b> & \"quoted\"")
    );

    let audit = admin.get("/audit").await;
    assert!(!audit.has("<b>bold</b>"));
    assert!(!audit.has("<script>alert(1)</script>"));
}

// ---------------------------------------------------------------------------------------
// Policy forms
// ---------------------------------------------------------------------------------------

async fn an_owner_creates_and_edits_a_policy(db: Db) {
    let app = spawn_app(db).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    let page = olga.get("/apps/shop").await;
    page.assert_status(StatusCode::OK);
    assert!(page.has("id=\"new-policy\""));
    let form = olga.get("/apps/shop/policies/new").await;
    form.assert_status(StatusCode::OK);
    olga.submit(
        &form,
        "/apps/shop/policies",
        &[
            ("name", "orders.create"),
            ("rate", "12"),
            ("rate_unit", "minute"),
            ("max_permits", "30"),
            ("description", "checkout"),
        ],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-created");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["rate"], 0.2);
    assert_eq!(policy["max_permits"], 30);
    assert_eq!(policy["allowed_apps"], json!(["shop"]));
    assert_eq!(policy["failure_mode"], "closed");
    assert_eq!(policy["enabled"], true);
    assert_eq!(policy["description"], "checkout");

    let page = olga.get("/apps/shop?done=policy-created").await;
    assert!(page.has("Policy created."));
    assert!(page.has("data-policy=\"orders.create\""));
    assert!(page.has("12 per minute"));

    let form = olga.get("/policies/orders.create/edit").await;
    form.assert_status(StatusCode::OK);
    assert_eq!(
        form.field("/policies/orders.create/edit", "rate")
            .as_deref(),
        Some("12")
    );
    olga.submit(
        &form,
        "/policies/orders.create/edit",
        &[("max_permits", "40"), ("failure_mode", "open")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(policy["max_permits"], 40);
    assert_eq!(policy["failure_mode"], "open");
    assert_eq!(policy["rate"], 0.2, "an unchanged rate is kept exactly");
    assert_eq!(policy["version"], 2);
    let event = newest_event(&app).await;
    assert_eq!(
        (event["actor"].clone(), event["action"].clone()),
        (json!("olga"), json!("update"))
    );
}
on_every_backend!(policy_forms, an_owner_creates_and_edits_a_policy);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_policy_comes_back_with_errors_next_to_its_fields() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;
    let before = snapshot(&app).await;

    let form = olga.get("/apps/shop/policies/new").await;
    let page = olga
        .submit(
            &form,
            "/apps/shop/policies",
            &[("name", "bad name!"), ("rate", "3"), ("max_permits", "0")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"max_permits-error\""));
    assert!(page.has("id=\"name-error\""));
    assert!(page.has("aria-invalid=\"true\""));
    // What was typed is kept.
    assert_eq!(
        page.field("/apps/shop/policies", "name").as_deref(),
        Some("bad name!")
    );
    assert_eq!(
        page.field("/apps/shop/policies", "max_permits").as_deref(),
        Some("0")
    );
    assert_eq!(
        page.field("/apps/shop/policies", "rate").as_deref(),
        Some("3")
    );
    assert_eq!(snapshot(&app).await, before, "nothing was saved");

    // A number that is not one is an error of its field, too.
    let page = olga
        .submit(
            &form,
            "/apps/shop/policies",
            &[
                ("name", "fine.name"),
                ("rate", "fast"),
                ("max_permits", "ten"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"rate-error\""));
    assert!(page.has("id=\"max_permits-error\""));

    // A name that is taken is an error of the name.
    let page = olga
        .submit(
            &form,
            "/apps/shop/policies",
            &[
                ("name", "orders.create"),
                ("rate", "1"),
                ("max_permits", "1"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"name-error\""));
    assert_eq!(snapshot(&app).await, before, "nothing was saved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_edit_form_does_not_overwrite_someone_elses_change() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/policies/orders.create/edit").await;
    assert_eq!(
        form.field("/policies/orders.create/edit", "version")
            .as_deref(),
        Some("1")
    );
    // Meanwhile the admin changes it through the API.
    let r = app
        .send(
            "PATCH",
            "/api/v1/policies/orders.create",
            &app.admin_token,
            Some(json!({"max_permits": 50})),
        )
        .await;
    expect_status(r, StatusCode::OK).await;

    let page = olga
        .submit(
            &form,
            "/policies/orders.create/edit",
            &[("max_permits", "7")],
        )
        .await;
    page.assert_status(StatusCode::CONFLICT);
    assert!(page.has("changed this policy"), "{}", page.body);
    assert!(page.has("max 50 permits"));
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(
        (policy["max_permits"].clone(), policy["version"].clone()),
        (json!(50), json!(2))
    );

    // The form kept olga's value and now carries their version: saving again is a
    // deliberate choice made with their change in view.
    assert_eq!(
        page.field("/policies/orders.create/edit", "max_permits")
            .as_deref(),
        Some("7")
    );
    olga.submit(&page, "/policies/orders.create/edit", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/orders.create").await;
    assert_eq!(
        (policy["max_permits"].clone(), policy["version"].clone()),
        (json!(7), json!(3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_deletes_a_policy_after_confirming() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    let confirm = olga.get("/policies/orders.create/delete").await;
    confirm.assert_status(StatusCode::OK);
    assert!(confirm.has("cannot be undone"));
    // Looking at the confirmation deletes nothing.
    admin_reads(&app, "/api/v1/policies/orders.create").await;

    olga.submit(&confirm, "/policies/orders.create/delete", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-deleted");
    expect_problem(
        app.get("/api/v1/policies/orders.create", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
    let page = olga.get("/apps/shop?done=policy-deleted").await;
    assert!(!page.has("data-policy=\"orders.create\""));
    // Its pages are gone too.
    olga.get("/policies/orders.create/edit")
        .await
        .assert_status(StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_whose_name_has_a_slash_is_edited_and_deleted() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    app.create_policy(json!({
        "name": "team/search", "owner_app": "shop", "rate": 1, "max_permits": 2
    }))
    .await;
    let mut olga = app.sign_in("olga").await;

    let page = olga.get("/apps/shop").await;
    assert!(page.has("href=\"/policies/team/search/edit\""));
    let form = olga.get("/policies/team/search/edit").await;
    form.assert_status(StatusCode::OK);
    olga.submit(&form, "/policies/team/search/edit", &[("max_permits", "5")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    assert_eq!(
        admin_reads(&app, "/api/v1/policies/team/search").await["max_permits"],
        5
    );
    let confirm = olga.get("/policies/team/search/delete").await;
    olga.submit(&confirm, "/policies/team/search/delete", &[])
        .await
        .assert_redirect("/apps/shop?done=policy-deleted");
    expect_problem(
        app.get("/api/v1/policies/team/search", &app.admin_token)
            .await,
        StatusCode::NOT_FOUND,
    )
    .await;
}

/// A rate below one per hour is shown per day, a unit the form's select does not offer;
/// the browser then sends its first option ("per second").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_slow_policy_keeps_its_rate() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    app.create_policy(json!({
        "name": "reports.daily", "owner_app": "shop", "rate": 1.0 / 86_400.0, "max_permits": 1
    }))
    .await;
    let mut olga = app.sign_in("olga").await;

    let form = olga.get("/policies/reports.daily/edit").await;
    form.assert_status(StatusCode::OK);
    olga.submit(
        &form,
        "/policies/reports.daily/edit",
        &[("description", "one report a day")],
    )
    .await
    .assert_redirect("/apps/shop?done=policy-updated");
    let policy = admin_reads(&app, "/api/v1/policies/reports.daily").await;
    assert_eq!(policy["description"], "one report a day");
    let rate = policy["rate"].as_f64().unwrap();
    assert!(
        (rate * 86_400.0 - 1.0).abs() < 1e-6,
        "one per day became {rate} per second"
    );
}

// ---------------------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_in_the_console_is_shown_once_works_and_can_be_revoked() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut olga = app.sign_in("olga").await;

    let page = olga
        .post_form("/apps/shop/keys", &[("label", "batch")])
        .await;
    page.assert_status(StatusCode::CREATED);
    assert_eq!(page.header("cache-control"), Some("no-store"));
    let start = page.body.find("rk_key_").expect("the key on the page");
    let len = page.body[start..]
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap();
    let key = page.body[start..start + len].to_owned();
    assert_eq!(
        page.body.matches(&key).count(),
        1,
        "the key is on the page once"
    );

    let r = app.acquire(&key, "orders.create", 1).await;
    expect_status(r, StatusCode::OK).await;

    // It is never shown again.
    let page = olga.get("/apps/shop").await;
    assert!(!page.has(&key));
    assert!(!page.has("rk_key_"));

    let shop = admin_reads(&app, "/api/v1/apps/shop").await;
    let id = shop["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["label"] == "batch")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(page.has(&format!("action=\"/apps/shop/keys/{id}/revoke\"")));
    olga.post_form(&format!("/apps/shop/keys/{id}/revoke"), &[])
        .await
        .assert_redirect("/apps/shop?done=key-revoked#keys");
    let r = app.acquire(&key, "orders.create", 1).await;
    expect_status(r, StatusCode::UNAUTHORIZED).await;
    let page = olga.get("/apps/shop").await;
    assert!(!page.has(&format!("action=\"/apps/shop/keys/{id}/revoke\"")));
}

// ---------------------------------------------------------------------------------------
// Users
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_creates_promotes_disables_and_resets_a_user() {
    let app = spawn_app(Db::Sqlite).await;
    let mut admin = app.sign_in_as_admin().await;

    let users = admin.get("/users").await;
    users.assert_status(StatusCode::OK);
    admin
        .submit(
            &users,
            "/users",
            &[("username", "nina"), ("password", "ninas first password")],
        )
        .await
        .assert_redirect("/users?done=user-created");
    let mut nina = app.sign_in_with("nina", "ninas first password").await;
    nina.get("/users")
        .await
        .assert_status(StatusCode::FORBIDDEN);

    // Made an admin: her session is an admin's at once.
    admin
        .post_form("/users/nina", &[("role", "admin")])
        .await
        .assert_redirect("/users?done=user-updated");
    nina.get("/users").await.assert_status(StatusCode::OK);
    let event = newest_event(&app).await;
    assert_eq!(event["after"], json!({"admin": true, "disabled": false}));

    // Disabled: her open session stops working at once, and she cannot sign in.
    admin
        .post_form("/users/nina", &[("role", "member"), ("disabled", "on")])
        .await
        .assert_redirect("/users?done=user-updated");
    nina.get("/apps").await.assert_redirect("/login?next=/apps");
    let mut again = app.browser();
    again
        .try_sign_in("nina", "ninas first password")
        .await
        .assert_status(StatusCode::UNAUTHORIZED);
    assert!(admin.get("/users").await.has("disabled</strong>"));

    // Enabled again, then her password reset: the sessions she had end.
    admin
        .post_form("/users/nina", &[("role", "member")])
        .await
        .assert_redirect("/users?done=user-updated");
    let mut nina = app.sign_in_with("nina", "ninas first password").await;
    admin
        .post_form("/users/nina/password", &[("password", "set by the admin")])
        .await
        .assert_redirect("/users?done=password-reset");
    assert!(!nina.is_signed_in().await, "her session ended");
    app.browser()
        .try_sign_in("nina", "ninas first password")
        .await
        .assert_status(StatusCode::UNAUTHORIZED);
    app.sign_in_with("nina", "set by the admin").await;
    // The admin's own session is untouched.
    assert!(admin.is_signed_in().await);

    // A password that is too short is an error in nina's row.
    let page = admin
        .post_form("/users/nina/password", &[("password", "short")])
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.alert().unwrap().contains("at least 8 characters"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_admin_cannot_demote_or_disable_themself() {
    let app = spawn_app(Db::Sqlite).await;
    let mut admin = app.sign_in_as_admin().await;
    let before = users(&app).await;

    for fields in [
        vec![("role", "member")],
        vec![("role", "admin"), ("disabled", "on")],
    ] {
        let page = admin.post_form("/users/admin", &fields).await;
        page.assert_status(StatusCode::CONFLICT);
        assert!(page.alert().unwrap().contains("last enabled admin"));
        assert_eq!(users(&app).await, before);
    }
    admin.get("/users").await.assert_status(StatusCode::OK);
}

// ---------------------------------------------------------------------------------------
// The account
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_changes_their_password_and_their_other_sessions_end() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_user("olga", None).await;
    let mut laptop = app.sign_in("olga").await;
    let mut phone = app.sign_in("olga").await;

    let account = laptop.get("/account").await;
    account.assert_status(StatusCode::OK);
    let page = laptop
        .submit(
            &account,
            "/account/password",
            &[
                ("current_password", "not my password"),
                ("new_password", "a brand new password"),
                ("confirm_password", "a brand new password"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"current_password-error\""));
    assert!(phone.is_signed_in().await, "nothing changed");
    for (new, confirm, error) in [
        ("short", "short", "new_password-error"),
        (
            "a brand new password",
            "a brand new pasword",
            "confirm_password-error",
        ),
    ] {
        let page = laptop
            .submit(
                &account,
                "/account/password",
                &[
                    ("current_password", PASSWORD),
                    ("new_password", new),
                    ("confirm_password", confirm),
                ],
            )
            .await;
        page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
        assert!(page.has(&format!("id=\"{error}\"")), "{error}");
        // Passwords typed are never sent back.
        assert_eq!(
            page.field("/account/password", "new_password").as_deref(),
            Some("")
        );
    }
    assert!(phone.is_signed_in().await, "nothing changed");

    laptop
        .submit(
            &account,
            "/account/password",
            &[
                ("current_password", PASSWORD),
                ("new_password", "a brand new password"),
                ("confirm_password", "a brand new password"),
            ],
        )
        .await
        .assert_redirect("/account?done=password-changed");
    assert!(laptop.is_signed_in().await, "the session in use stays");
    assert!(!phone.is_signed_in().await, "the other session ended");
    app.browser()
        .try_sign_in("olga", PASSWORD)
        .await
        .assert_status(StatusCode::UNAUTHORIZED);
    app.sign_in_with("olga", "a brand new password").await;
}

// ---------------------------------------------------------------------------------------
// The audit log
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_lists_changes_newest_first_and_filters_them() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    let mut admin = app.sign_in_as_admin().await;
    let mut olga = app.sign_in("olga").await;
    let mut otto = app.sign_in("otto").await;
    for name in ["p1", "p2"] {
        olga.post_form("/apps/shop/policies", &policy_fields(name, "5"))
            .await
            .assert_redirect("/apps/shop?done=policy-created");
    }
    let form = olga.get("/policies/p1/edit").await;
    olga.submit(&form, "/policies/p1/edit", &[("max_permits", "6")])
        .await
        .assert_redirect("/apps/shop?done=policy-updated");
    let mut fields = policy_fields("o1", "5");
    fields[5] = ("allowed_apps", "other");
    otto.post_form("/apps/other/policies", &fields)
        .await
        .assert_redirect("/apps/other?done=policy-created");

    let row = |who: &str, app: &str, what: &str, action: &str| {
        [who, app, what, action].map(str::to_owned)
    };
    let rows = audit_rows(&admin.get("/audit").await);
    assert_eq!(
        rows[..4],
        [
            row("otto", "other", "policy o1", "create"),
            row("olga", "shop", "policy p1", "update"),
            row("olga", "shop", "policy p2", "create"),
            row("olga", "shop", "policy p1", "create"),
        ]
    );

    let rows = audit_rows(&admin.get("/audit?app=shop").await);
    assert!(rows.iter().all(|r| r[1] == "shop"), "{rows:?}");
    assert!(rows.contains(&row("olga", "shop", "policy p1", "update")));

    let rows = audit_rows(&admin.get("/audit?user=olga").await);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r[0] == "olga"));

    let rows = audit_rows(&admin.get("/audit?policy=p1").await);
    assert_eq!(
        rows,
        [
            row("olga", "shop", "policy p1", "update"),
            row("olga", "shop", "policy p1", "create"),
        ]
    );
    let page = admin.get("/audit?policy=nothing").await;
    assert!(audit_rows(&page).is_empty());
    assert!(page.has("No event matches these filters."));

    // A viewer of shop sees shop's events, and nothing of an application they do not
    // belong to (nor of users).
    let mut vic = app.sign_in("vic").await;
    let rows = audit_rows(&vic.get("/audit").await);
    assert_eq!(rows[0], row("olga", "shop", "policy p1", "update"));
    assert!(rows.iter().all(|r| r[1] == "shop"), "{rows:?}");
    assert!(audit_rows(&vic.get("/audit?app=other").await).is_empty());
    assert!(audit_rows(&vic.get("/audit?user=otto").await).is_empty());
}

/// Enough member changes through the API that the audit log has `count` events.
async fn audit_log_of(app: &TestApp, count: usize) {
    let mut have = app.audit_count().await;
    let mut role = "owner";
    while have < count {
        let r = app
            .send(
                "PUT",
                "/api/v1/apps/shop/members/olga",
                &app.admin_token,
                Some(json!({"role": role})),
            )
            .await;
        expect_status(r, StatusCode::OK).await;
        role = if role == "owner" { "viewer" } else { "owner" };
        have += 1;
    }
    assert_eq!(app.audit_count().await, count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_audit_log_has_a_second_page() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "viewer"))).await;
    let mut admin = app.sign_in_as_admin().await;
    audit_log_of(&app, 57).await;

    let first = admin.get("/audit").await;
    assert_eq!(audit_rows(&first).len(), 50);
    assert!(link(&first, "prev").is_none());
    let next = link(&first, "next").expect("a link to page 2");
    assert_eq!(next, "/audit?app=&user=&policy=&page=2");
    let second = admin.get(&next).await;
    second.assert_status(StatusCode::OK);
    assert_eq!(audit_rows(&second).len(), 7);
    assert!(link(&second, "next").is_none());
    assert_eq!(
        link(&second, "prev").as_deref(),
        Some("/audit?app=&user=&policy=&page=1")
    );
    // The oldest event is the first change the tests made: the app's creation.
    assert_eq!(audit_rows(&second).last().unwrap()[2], "user admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_log_of_exactly_one_page_has_no_next_link() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "viewer"))).await;
    let mut admin = app.sign_in_as_admin().await;
    audit_log_of(&app, 50).await;

    let first = admin.get("/audit").await;
    assert_eq!(audit_rows(&first).len(), 50);
    assert_eq!(link(&first, "next"), None, "page 2 would be empty");
}

// ---------------------------------------------------------------------------------------
// Live state
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_watches_the_live_state_of_shops_policies() {
    let app = spawn_app(Db::Sqlite).await;
    shop_and_people(&app).await;
    // Three permits, refilled one every 1000 s: none come back during the test.
    app.create_policy(json!({
        "name": "search", "owner_app": "shop", "rate": 0.001, "max_permits": 3
    }))
    .await;
    let key = app.create_key("shop").await;
    let mut vic = app.sign_in("vic").await;

    let live = vic.get("/apps/shop/live").await;
    live.assert_status(StatusCode::OK);
    assert_eq!(live.header("cache-control"), Some("no-store"));
    assert!(
        live.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    let search = |live: &Page| {
        live.json()["policies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "search")
            .cloned()
            .expect("search is listed")
    };
    assert_eq!(search(&live)["current"], "3");
    assert_eq!(search(&live)["max_permits"], 3);

    for _ in 0..3 {
        expect_status(app.acquire(&key, "search", 1).await, StatusCode::OK).await;
    }
    let live = vic.get("/apps/shop/live").await;
    assert_eq!(search(&live)["current"], "0");

    // Counts reach Redis every couple of seconds.
    let totals = |policy: &Value| {
        policy["activity"]
            .as_array()
            .unwrap()
            .iter()
            .fold((0, 0), |(g, d), m| {
                (
                    g + m["granted"].as_u64().unwrap(),
                    d + m["denied"].as_u64().unwrap(),
                )
            })
    };
    let activity_is = |want: (u64, u64)| {
        let vic = vic.clone();
        move || {
            let mut vic = vic.clone();
            async move { totals(&search(&vic.get("/apps/shop/live").await)) == want }
        }
    };
    assert!(
        eventually(Duration::from_secs(15), activity_is((3, 0))).await,
        "the three grants are counted"
    );

    expect_status(
        app.acquire(&key, "search", 1).await,
        StatusCode::TOO_MANY_REQUESTS,
    )
    .await;
    assert!(
        eventually(Duration::from_secs(15), activity_is((3, 1))).await,
        "the denial is counted"
    );

    // Someone who does not belong to shop sees none of it.
    let mut otto = app.sign_in("otto").await;
    otto.get("/apps/shop/live")
        .await
        .assert_status(StatusCode::FORBIDDEN);
    app.browser()
        .get("/apps/shop/live")
        .await
        .assert_redirect("/login?next=/apps/shop/live");
}

// ---------------------------------------------------------------------------------------
// Pages that are not there, and static files
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_pages_and_static_files() {
    let app = spawn_app(Db::Sqlite).await;
    let mut browser = app.browser();

    let page = browser.get("/nope").await;
    page.assert_status(StatusCode::NOT_FOUND);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert!(page.has("Page not found"));

    let r = app
        .client
        .get(app.url("/api/v1/nope"))
        .send()
        .await
        .unwrap();
    expect_problem(r, StatusCode::NOT_FOUND).await;

    for (file, content_type, sample) in [
        ("style.css", "text/css; charset=utf-8", "{"),
        ("console.js", "text/javascript; charset=utf-8", "use strict"),
    ] {
        let page = browser.get(&format!("/static/{file}")).await;
        page.assert_status(StatusCode::OK);
        assert_eq!(page.header("content-type"), Some(content_type));
        assert!(page.has(sample));
    }
    let page = browser.get("/static/nope.js").await;
    page.assert_status(StatusCode::NOT_FOUND);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );

    // The home page sends to the applications (and so, signed out, to sign in).
    browser.get("/").await.assert_redirect("/apps");
}

/// Names no user can have (a NUL, which PostgreSQL refuses in text) are unknown users and
/// users, never a server error.
async fn unknown_names(db: Db) {
    let app = spawn_app(db).await;
    let mut browser = app.browser();
    browser
        .try_sign_in("ol\u{0}ga", PASSWORD)
        .await
        .assert_status(StatusCode::UNAUTHORIZED);

    let mut admin = app.sign_in_as_admin().await;
    admin
        .post_form(
            "/users/ol%00ga/password",
            &[("password", "a new password 1")],
        )
        .await
        .assert_status(StatusCode::NOT_FOUND);
    admin
        .post_form("/users/ol%00ga", &[("role", "admin")])
        .await
        .assert_status(StatusCode::NOT_FOUND);
}

on_every_backend!(names_no_user_can_have_are_unknown, unknown_names);
