//! CSRF tokens: the login form's, signing out, an owner's forms, and every console form
//! posted without the session's own token (none, or another session's).

use reqwest::StatusCode;

use super::{assert_refused, changes_to_shop, refused_without_trace, shop_and_people, snapshot};
use crate::helpers::*;

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

/// One console form as a forged POST would send it: where, what, and what the console
/// answers when the right token comes with it.
struct Form {
    path: String,
    fields: Vec<(&'static str, &'static str)>,
    /// Where the console sends the browser after the change, or None for a page of its own.
    done: Option<String>,
}

fn form(path: &str, fields: &[(&'static str, &'static str)], done: Option<&str>) -> Form {
    Form {
        path: path.to_owned(),
        fields: fields.to_vec(),
        done: done.map(str::to_owned),
    }
}

/// Every POST route of the console (`console::routes`) but the sign-in form, with fields
/// an admin may send; logging out comes last, since it ends the session.
fn every_console_form(key_id: &str) -> Vec<Form> {
    let mut edit = super::policy_fields("orders.create", "99");
    edit.push(("version", "1"));
    vec![
        form(
            "/apps",
            &[("slug", "forged-app"), ("name", "Forged")],
            Some("/apps/forged-app?done=app-created"),
        ),
        form(
            "/apps/shop/members",
            &[("username", "ulla"), ("role", "owner")],
            None,
        ),
        form("/apps/shop/members/vic/remove", &[], None),
        form("/apps/shop/keys", &[("label", "forged")], None),
        form(&format!("/apps/shop/keys/{key_id}/revoke"), &[], None),
        form(
            "/apps/shop/policies",
            &super::policy_fields("forged.one", "5"),
            None,
        ),
        form("/policies/orders.create/edit", &edit, None),
        // Back to version 1, from the version 2 the edit above saved.
        form(
            "/policies/orders.create/rollback",
            &[("to_version", "1"), ("version", "2")],
            Some("/policies/orders.create/history?done=policy-rolled-back"),
        ),
        form(
            "/policies/orders.create/delete",
            &[],
            Some("/apps/shop?done=policy-deleted"),
        ),
        form(
            "/users",
            &[("username", "nina"), ("password", "ninas first password")],
            Some("/users?done=user-created"),
        ),
        form(
            "/users/vic",
            &[("role", "admin")],
            Some("/users?done=user-updated"),
        ),
        form(
            "/users/otto/password",
            &[("password", "set by the admin")],
            Some("/users?done=password-reset"),
        ),
        form(
            "/account/password",
            &[
                ("current_password", PASSWORD),
                ("new_password", "a brand new password"),
                ("confirm_password", "a brand new password"),
            ],
            Some("/account?done=password-changed"),
        ),
        form("/logout", &[], Some("/login")),
    ]
}

/// Each console form, posted by a signed-in admin without a `csrf` field and with another
/// session's token, is refused with 403 and changes nothing: not what it would change (the
/// applications, members, keys, policies, users and passwords, or the session itself for
/// signing out), and no audit event. Then the same form with the session's own token does
/// change something, so the refusals were the token's doing, not a form that could not
/// have worked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_form_needs_the_sessions_own_csrf_token() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut admin = app.sign_in_as_admin().await;
    let own_token = admin.session_csrf().await;
    // A real token, but of another session (olga's).
    let foreign_token = app.sign_in("olga").await.session_csrf().await;
    assert_ne!(own_token, foreign_token);

    let forms = every_console_form(&key_id);
    assert_eq!(forms.len(), 14, "every POST route but /login");
    for Form { path, fields, done } in forms {
        let before = snapshot(&app).await;
        for (csrf, what) in [
            (None, "no csrf field"),
            (Some(&foreign_token), "a foreign token"),
        ] {
            let page = admin
                .post_with_csrf(&path, &fields, csrf.map(String::as_str))
                .await;
            let what = format!("POST {path} with {what}");
            refused_without_trace(&app, &before, &what, page, StatusCode::FORBIDDEN).await;
            assert!(admin.is_signed_in().await, "{what}: the session survives");
        }

        let page = admin.post_with_csrf(&path, &fields, Some(&own_token)).await;
        match &done {
            Some(location) => page.assert_redirect(location),
            None => assert!(
                page.status.is_success() || page.status.is_redirection(),
                "POST {path} with the session's token: {} {}",
                page.status,
                page.body
            ),
        }
        if path == "/logout" {
            assert!(
                !admin.is_signed_in().await,
                "signed out with the right token"
            );
        } else {
            assert_ne!(
                snapshot(&app).await,
                before,
                "POST {path} with the session's token changes something"
            );
        }
    }
}

/// The console's route table, as written: the list of POST routes is read from it, so
/// that a route added there is covered here without anyone listing it.
// It should become a public list of the console's routes (`console::POST_ROUTES`), read
// here instead of the source.
const CONSOLE_ROUTES_SOURCE: &str = include_str!("../../../src/console/routes.rs");

/// The path pattern of every `web::post()` route in `console::routes`, in order: from
/// `.route("/path", web::post()...)` and from `web::resource("/path")` followed by
/// `.route(web::post()...)`.
fn console_post_routes() -> Vec<String> {
    let source = CONSOLE_ROUTES_SOURCE;
    let body = &source[source.find("pub fn routes(").expect("console::routes")..];
    let body = &body[..body.find("\n}\n").expect("the end of console::routes")];
    // The first string literal at or after `at`, and where it ends.
    let literal = |at: usize| -> (String, usize) {
        let start = at + body[at..].find('"').unwrap() + 1;
        let end = start + body[start..].find('"').unwrap();
        (body[start..end].to_owned(), end)
    };
    let mut routes = Vec::new();
    let mut resource = None;
    let mut at = 0;
    while let Some(found) = [".route(", "web::resource("]
        .iter()
        .filter_map(|token| body[at..].find(token).map(|i| (at + i, *token)))
        .min()
    {
        let (start, token) = found;
        at = start + token.len();
        if token == "web::resource(" {
            let (path, end) = literal(at);
            resource = Some(path);
            at = end;
            continue;
        }
        let rest = body[at..].trim_start();
        let (path, method_at) = if rest.starts_with('"') {
            let (path, end) = literal(at);
            (path, end)
        } else {
            (resource.clone().expect("a resource's route"), at)
        };
        let method = &body[method_at..];
        let method = &method[method.find("web::").unwrap() + "web::".len()..];
        let method = &method[..method.find('(').unwrap()];
        if method == "post" {
            routes.push(path);
        }
    }
    routes
}

#[test]
fn the_console_route_table_is_read_as_written() {
    let routes = console_post_routes();
    // Spot checks of both shapes, and of the count: a parser gone wrong finds fewer.
    assert!(routes.contains(&"/login".to_owned()), "{routes:?}");
    assert!(
        routes.contains(&"/apps/{slug}/policies".to_owned()),
        "{routes:?}"
    );
    assert!(
        routes.contains(&"/policy-files/apply".to_owned()),
        "{routes:?}"
    );
    assert!(
        !routes.contains(&"/audit".to_owned()),
        "a GET route: {routes:?}"
    );
    assert!(
        routes.len() >= 23,
        "{} POST routes: {routes:?}",
        routes.len()
    );
}

/// A POST route's pattern with real names in place of its parameters: the application,
/// policy, user, key and token the story made, so that the only thing wrong with the
/// request is its CSRF token.
fn concrete(pattern: &str, key_id: &str, token_id: &str) -> String {
    let id = if pattern.starts_with("/account/tokens/") {
        token_id
    } else {
        key_id
    };
    pattern
        .replace("{slug}", "shop")
        .replace("{name:.+}", "orders.create")
        .replace("{username}", "vic")
        .replace("{id}", id)
}

/// Fields that the route's form would send (a forged post would send them too).
fn fields_for(pattern: &str) -> Vec<(&'static str, &'static str)> {
    let mut fields = match pattern {
        "/apps" => vec![("slug", "forged-app"), ("name", "Forged")],
        "/apps/{slug}/settings" => {
            vec![("slug", "forged"), ("name", "Forged"), ("description", "")]
        }
        "/apps/{slug}/members" => vec![("username", "ulla"), ("role", "owner")],
        "/apps/{slug}/keys" | "/account/tokens" => vec![("label", "forged")],
        "/apps/{slug}/keys/{id}/rotate" => vec![("old_key_valid_for", "now")],
        "/apps/{slug}/policies" => super::policy_fields("forged.one", "5"),
        "/policies/{name:.+}/edit" => super::policy_fields("orders.create", "99"),
        "/policies/{name:.+}/rollback" => vec![("to_version", "1")],
        "/policies/{name:.+}/reset" => vec![("key", "x")],
        "/policy-files/plan" | "/policy-files/apply" => {
            vec![("file", "app: shop\npolicies: []\n"), ("prune", "true")]
        }
        "/users" => vec![("username", "nina"), ("password", "ninas first password")],
        "/users/{username}" => vec![("role", "admin")],
        "/users/{username}/password" => vec![("password", "set by the admin")],
        "/account/password" => vec![
            ("current_password", PASSWORD),
            ("new_password", "a brand new password"),
            ("confirm_password", "a brand new password"),
        ],
        _ => vec![],
    };
    if pattern.starts_with("/policies/") {
        fields.push(("version", "1"));
    }
    fields
}

/// Every POST route of the console but the sign-in form (which has a token of its own,
/// tested above), as read from the route table: posted by a signed-in admin, who may do
/// everything, without a `csrf` field and with another session's token, it is refused
/// with 403 and changes nothing (no application, member, key, policy, user or password,
/// no audit event), and the session survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_post_route_refuses_a_forged_post() {
    let app = spawn_app(Db::Sqlite).await;
    let key_id = shop_and_people(&app).await;
    let mut admin = app.sign_in_as_admin().await;
    let foreign_token = app.sign_in("olga").await.session_csrf().await;
    // A token of the admin's own to revoke: the id the account page shows.
    let account = admin.get("/account").await;
    let at = account
        .body
        .find("data-token=\"")
        .expect("a token on /account")
        + 12;
    let token_id: String = account.body[at..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();

    let routes: Vec<String> = console_post_routes()
        .into_iter()
        .filter(|route| route != "/login")
        .collect();
    let before = snapshot(&app).await;
    for pattern in &routes {
        let path = concrete(pattern, &key_id, &token_id);
        let fields = fields_for(pattern);
        for (csrf, what) in [
            (None, "no csrf field"),
            (Some(foreign_token.as_str()), "a foreign token"),
        ] {
            let page = admin.post_with_csrf(&path, &fields, csrf).await;
            let what = format!("POST {path} ({pattern}) with {what}");
            refused_without_trace(&app, &before, &what, page, StatusCode::FORBIDDEN).await;
            assert!(admin.is_signed_in().await, "{what}: the session survives");
        }
    }
    // The route table's 22 POST routes but /login, today; more as they are added.
    assert!(routes.len() >= 22, "{routes:?}");
}
