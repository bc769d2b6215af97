//! The account page: changing one's password ends the other sessions; a token's terms.

use reqwest::StatusCode;

use crate::helpers::*;

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
    // Everything wrong at once is said at once, each next to its field.
    let page = laptop
        .submit(
            &account,
            "/account/password",
            &[
                ("current_password", "not my password"),
                ("new_password", "short"),
                ("confirm_password", "shorter"),
            ],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    for error in [
        "current_password-error",
        "new_password-error",
        "confirm_password-error",
    ] {
        assert!(
            page.has(&format!("id=\"{error}\"")),
            "{error}: {}",
            page.body
        );
    }
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

/// A token made on the account page may be read-only and expire: the page says so in its
/// row, and the admin API holds it to both. A bad form says everything wrong at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_made_on_the_account_page_is_read_only_and_expires_as_asked() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_app("shop").await;
    app.create_user("olga", Some(("shop", "owner"))).await;
    let mut olga = app.sign_in("olga").await;

    let page = olga
        .post_form(
            "/account/tokens",
            &[("label", " "), ("expires_at", "2001-01-01T00:00")],
        )
        .await;
    page.assert_status(StatusCode::UNPROCESSABLE_ENTITY);
    assert!(page.has("id=\"token-label-error\""), "{}", page.body);
    assert!(page.has("id=\"token-expires-at-error\""));
    assert!(page.has("must be in the future"));

    olga.post_form(
        "/account/tokens",
        &[
            ("label", "dashboards"),
            ("expires_at", "2099-06-30T12:00"),
            ("read_only", "on"),
        ],
    )
    .await
    .assert_redirect("/account#new-token");
    let account = olga.get("/account").await;
    let start = account
        .body
        .find("rk_pat_")
        .expect("the new token on the page");
    let token: String = account.body[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    let row = account
        .body
        .split("<tr data-token=")
        .skip(1)
        .find(|row| row.contains("dashboards"))
        .expect("the token's row");
    assert!(row.contains("Read-only"), "{row}");
    assert!(row.contains("2099-06-30 12:00"), "{row}");

    expect_status(app.get("/api/v1/apps/shop", &token).await, StatusCode::OK).await;
    let r = app
        .send(
            "PATCH",
            "/api/v1/apps/shop",
            &token,
            Some(serde_json::json!({"name": "S"})),
        )
        .await;
    expect_problem(r, StatusCode::FORBIDDEN).await;
}
