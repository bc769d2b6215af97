//! The account page: changing one's password ends the other sessions.

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
