//! A browser on the web console (`Browser`): its cookie jar, signing in, and the forms
//! it posts with the session's CSRF token.

use ratekeeper::auth::hash_password;
use reqwest::StatusCode;
use secrecy::SecretString;

use super::app::TestApp;
use super::html::{Page, form_encode};

/// The password `create_user` (and the bootstrap admin) are given.
pub const PASSWORD: &str = "a long password";

/// A browser on the console: a cookie jar of its own, redirects not followed, and the
/// signed-in session's CSRF token added to the forms it posts.
#[derive(Clone)]
pub struct Browser {
    address: String,
    client: reqwest::Client,
    cookies: std::collections::BTreeMap<String, String>,
    /// The session's CSRF token, once a page showed it.
    csrf: Option<String>,
    /// Sends `X-Forwarded-Proto: https`, as a TLS-terminating proxy in front would.
    pub behind_tls: bool,
}

impl TestApp {
    /// A browser that has not signed in.
    pub fn browser(&self) -> Browser {
        Browser {
            address: self.address.clone(),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: Default::default(),
            csrf: None,
            behind_tls: false,
        }
    }

    /// A browser that has not signed in, connecting from `address` (a loopback address
    /// such as 127.0.0.2: the server sees a client of another address).
    pub fn browser_from(&self, address: std::net::IpAddr) -> Browser {
        Browser {
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .local_address(address)
                .build()
                .unwrap(),
            ..self.browser()
        }
    }

    /// A browser signed in as `username` with the test password.
    pub async fn sign_in(&self, username: &str) -> Browser {
        self.sign_in_with(username, PASSWORD).await
    }

    /// A browser signed in as the bootstrap admin. Its first password is random (printed
    /// once at start), so it is set to the test password first, in the database (a reset
    /// through the control plane would revoke the admin's access token the tests use).
    pub async fn sign_in_as_admin(&self) -> Browser {
        let store = self.core().await.store;
        let hash = hash_password(SecretString::from(PASSWORD))
            .await
            .expect("hashed");
        let mut tx = store.begin().await.unwrap();
        let admin = tx.user_by_name("admin").await.unwrap().expect("the admin");
        tx.set_password_hash(&admin.id, &hash).await.unwrap();
        tx.commit().await.unwrap();
        self.sign_in("admin").await
    }

    pub async fn sign_in_with(&self, username: &str, password: &str) -> Browser {
        let mut browser = self.browser();
        let page = browser.try_sign_in(username, password).await;
        page.assert_redirect("/apps");
        browser
    }

    /// Every audit event, counted as the admin sees them.
    pub async fn audit_count(&self) -> usize {
        let mut count = 0;
        for page in 1.. {
            let events = self.audit(&format!("?page={page}")).await.len();
            count += events;
            if events < 50 {
                break;
            }
        }
        count
    }
}

impl Browser {
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies.get(name).map(String::as_str)
    }

    /// Puts a cookie in the jar, as if another page (or an attacker) had set it.
    pub fn set_cookie(&mut self, name: &str, value: &str) {
        self.cookies.insert(name.to_owned(), value.to_owned());
    }

    pub fn forget_cookie(&mut self, name: &str) {
        self.cookies.remove(name);
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let mut request = request;
        if !self.cookies.is_empty() {
            let header = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            request = request.header("cookie", header);
        }
        if self.behind_tls {
            request = request.header("x-forwarded-proto", "https");
        }
        let response = request.send().await.expect("request sent");
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let pair = set.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            let expired = set.to_ascii_lowercase().contains("max-age=0");
            if expired || value.is_empty() {
                self.cookies.remove(name.trim());
            } else {
                self.cookies
                    .insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
        let page = Page {
            status: response.status(),
            headers: response.headers().clone(),
            body: response.text().await.unwrap(),
        };
        if let Some(csrf) = page.csrf()
            && page.status.is_success()
            && page.has("id=\"logout\"")
        {
            self.csrf = Some(csrf);
        }
        page
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.address));
        self.send(request).await
    }

    /// POSTs exactly these fields (nothing added).
    pub async fn post_raw<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        path: &str,
        fields: &[(K, V)],
    ) -> Page {
        let request = self
            .client
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_encode(fields));
        self.send(request).await
    }

    /// The session's CSRF token, read from a page when not known yet.
    pub async fn session_csrf(&mut self) -> String {
        if self.csrf.is_none() {
            self.get("/account").await.assert_status(StatusCode::OK);
        }
        self.csrf
            .clone()
            .expect("a signed-in page shows the CSRF token")
    }

    /// POSTs a form with the session's CSRF token, as the console's own forms do.
    pub async fn post_form(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let csrf = self.session_csrf().await;
        self.post_with_csrf(path, fields, Some(&csrf)).await
    }

    /// POSTs a form with this CSRF token, or with none: a forged or stale form.
    pub async fn post_with_csrf(
        &mut self,
        path: &str,
        fields: &[(&str, &str)],
        csrf: Option<&str>,
    ) -> Page {
        let mut all: Vec<(&str, &str)> = fields.to_vec();
        if let Some(csrf) = csrf {
            all.push(("csrf", csrf));
        }
        self.post_raw(path, &all).await
    }

    /// Submits the form of `page` that posts to `action`, as the browser would, with
    /// `changes` typed into it.
    pub async fn submit(&mut self, page: &Page, action: &str, changes: &[(&str, &str)]) -> Page {
        let mut fields = page.form(action);
        for (name, value) in changes {
            match fields.iter_mut().find(|(n, _)| n == name) {
                Some(field) => field.1 = (*value).to_owned(),
                None => fields.push(((*name).to_owned(), (*value).to_owned())),
            }
        }
        self.post_raw(action, &fields).await
    }

    /// Fills in and sends the sign-in form; the answer to the POST.
    pub async fn try_sign_in(&mut self, username: &str, password: &str) -> Page {
        let form = self.get("/login").await;
        form.assert_status(StatusCode::OK);
        let page = self
            .submit(
                &form,
                "/login",
                &[("username", username), ("password", password)],
            )
            .await;
        if page.status == StatusCode::SEE_OTHER {
            self.csrf = None;
        }
        page
    }

    /// Whether the browser's session still works: a page behind sign-in answers 200, or
    /// 303 to the sign-in page.
    pub async fn is_signed_in(&mut self) -> bool {
        let page = self.get("/account").await;
        match page.status {
            StatusCode::OK => true,
            StatusCode::SEE_OTHER => {
                assert!(page.location().unwrap().starts_with("/login"));
                false
            }
            other => panic!("GET /account answered {other}: {}", page.body),
        }
    }
}
