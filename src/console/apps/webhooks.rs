//! An application's webhooks (`/apps/{slug}/webhooks`): owners make, rotate and delete
//! them and send a delivery again; viewers see them and their delivery log. A new secret
//! reaches the page through a one-time flash (post-redirect-get), as a new API key does.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use crate::console::error::ConsoleError;
use crate::console::forms::FormErrors;
use crate::console::page::{Chrome, Notice};
use crate::console::respond::{render, render_status, see_other};
use crate::console::session::{CsrfForm, SignedIn};
use crate::control::{
    AppView, ControlError, DEFAULT_QUIET_PERIOD_S, DeliveryView, Reveal, Revealed, WebhookInput,
    WebhookView,
};
use crate::domain::FieldErrors;
use crate::state::AppState;

/// What the form holds, as typed (kept when it is shown again with its errors).
#[derive(Debug, Clone, Deserialize)]
pub struct WebhookDraft {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub denying: Option<String>,
    #[serde(default)]
    pub recovered: Option<String>,
    #[serde(default)]
    pub near_limit: Option<String>,
    #[serde(default)]
    pub changed: Option<String>,
    #[serde(default)]
    pub format: String,
    #[serde(default)]
    pub quiet_period_s: String,
    /// Percent of the capacity, as people say it.
    #[serde(default)]
    pub near_limit_percent: String,
}

impl Default for WebhookDraft {
    fn default() -> Self {
        Self {
            url: String::new(),
            denying: Some("on".into()),
            recovered: Some("on".into()),
            near_limit: None,
            changed: None,
            format: "json".into(),
            quiet_period_s: DEFAULT_QUIET_PERIOD_S.to_string(),
            near_limit_percent: "10".into(),
        }
    }
}

impl WebhookDraft {
    /// The JSON API's input, or the fields the form alone can get wrong.
    fn input(&self) -> Result<WebhookInput, FieldErrors> {
        let mut errors = FieldErrors::default();
        let events = [
            (&self.denying, "policy.denying"),
            (&self.recovered, "policy.recovered"),
            (&self.near_limit, "policy.near_limit"),
            (&self.changed, "policy.changed"),
        ]
        .into_iter()
        .filter(|(on, _)| on.is_some())
        .map(|(_, event)| event.to_owned())
        .collect();
        let quiet_period_s = self.quiet_period_s.trim().parse::<i64>().ok();
        if quiet_period_s.is_none() {
            errors.push("quiet_period_s", "must be a whole number of seconds");
        }
        let near_limit_below = self
            .near_limit_percent
            .trim()
            .parse::<f64>()
            .ok()
            .map(|percent| percent / 100.0);
        if near_limit_below.is_none() {
            errors.push("near_limit_below", "must be a percentage, e.g. 10");
        }
        errors.into_result()?;
        Ok(WebhookInput {
            url: Some(self.url.clone()),
            events: Some(events),
            format: Some(self.format.clone()),
            quiet_period_s,
            near_limit_below,
        })
    }

    pub fn checked(&self, event: &str) -> bool {
        match event {
            "denying" => self.denying.is_some(),
            "recovered" => self.recovered.is_some(),
            "near_limit" => self.near_limit.is_some(),
            _ => self.changed.is_some(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct WebhookForm {
    #[serde(flatten)]
    draft: WebhookDraft,
    #[serde(default)]
    csrf: SecretString,
}

#[derive(Template)]
#[template(path = "apps/webhooks.html")]
struct WebhooksPage {
    chrome: Chrome,
    app: AppView,
    may_edit: bool,
    webhooks: Vec<WebhookView>,
    /// Secrets made for this page, each shown this once: (webhook id, URL, secret).
    new_secrets: Vec<(String, String, String)>,
    draft: WebhookDraft,
    errors: FormErrors,
}

impl WebhooksPage {
    fn percent(fraction: &f64) -> String {
        format!("{}", (fraction * 1000.0).round() / 10.0)
    }

    /// The policy an event is about, to link its page.
    fn policy_of(delivery: &DeliveryView) -> Option<&str> {
        delivery.data.get("policy")?.as_str()
    }
}

/// The page's address, where its secrets wait.
fn page_of(slug: &str) -> String {
    format!("/apps/{slug}/webhooks")
}

async fn page(
    state: &AppState,
    signed_in: &SignedIn,
    slug: &str,
    draft: WebhookDraft,
    errors: FormErrors,
) -> Result<WebhooksPage, ConsoleError> {
    let detail = state.control.get_app(&signed_in.actor, slug).await?;
    let webhooks = state.control.list_webhooks(&signed_in.actor, slug).await?;
    let new_secrets = state
        .control
        .take_revealed(&signed_in.token, &page_of(slug))
        .await?
        .into_iter()
        .filter_map(|r| match r {
            Revealed::WebhookSecret { id, url, secret } => Some((id, url, secret)),
            Revealed::ApiKey { .. } | Revealed::AccessToken { .. } => None,
        })
        .collect();
    Ok(WebhooksPage {
        chrome: signed_in.chrome("apps"),
        may_edit: detail.may_edit,
        app: detail.app,
        webhooks,
        new_secrets,
        draft,
        errors,
    })
}

/// `GET /apps/{slug}/webhooks`
pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    notice: web::Query<Notice>,
) -> Result<HttpResponse, ConsoleError> {
    let mut page = page(
        &state,
        &signed_in,
        &slug,
        WebhookDraft::default(),
        FormErrors::default(),
    )
    .await?;
    page.chrome = page.chrome.with_notice(&notice);
    render(&page)
}

/// `POST /apps/{slug}/webhooks`: 303 to the page, which shows the secret once; the form
/// again with its errors (422) if any.
pub async fn create(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: web::Form<WebhookForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let draft = form.into_inner().draft;
    let page_address = page_of(&slug);
    let reveal = Reveal::OnPage {
        session: &signed_in.token,
        page: &page_address,
    };
    let errors = match draft.input() {
        Err(errors) => errors,
        Ok(input) => match state
            .control
            .create_webhook(&signed_in.actor, &slug, &input, reveal)
            .await
        {
            Ok(_) => return Ok(see_other(&format!("{page_address}#new-secret"))),
            Err(ControlError::Invalid(errors)) => errors,
            Err(e) => return Err(e.into()),
        },
    };
    let page = page(
        &state,
        &signed_in,
        &slug,
        draft,
        FormErrors::from_fields(&errors),
    )
    .await?;
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}

/// `POST /apps/{slug}/webhooks/{id}/rotate`: a new secret, shown once on the page.
pub async fn rotate(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, id) = path.into_inner();
    let page_address = page_of(&slug);
    let reveal = Reveal::OnPage {
        session: &signed_in.token,
        page: &page_address,
    };
    state
        .control
        .rotate_webhook_secret(&signed_in.actor, &slug, &id, reveal)
        .await?;
    Ok(see_other(&format!(
        "{page_address}?done=webhook-rotated#new-secret"
    )))
}

/// `POST /apps/{slug}/webhooks/{id}/delete`
pub async fn delete(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, id) = path.into_inner();
    state
        .control
        .delete_webhook(&signed_in.actor, &slug, &id)
        .await?;
    Ok(see_other(&format!(
        "{}?done=webhook-deleted",
        page_of(&slug)
    )))
}

/// `POST /apps/{slug}/webhooks/{id}/deliveries/{delivery}/send-again`
pub async fn send_again(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, id, delivery) = path.into_inner();
    state
        .control
        .send_webhook_again(&signed_in.actor, &slug, &id, &delivery)
        .await?;
    Ok(see_other(&format!(
        "{}?done=webhook-sent-again#webhook-{id}",
        page_of(&slug)
    )))
}
