//! An application's API keys: owners create them (with an optional expiry), rotate them
//! (a new key, the old one kept for a while) and revoke them. A new key's text reaches
//! the application's page through a one-time flash (post-redirect-get): reloading the
//! page neither makes another key nor shows this one again.

use actix_web::{HttpResponse, web};
use secrecy::SecretString;
use serde::Deserialize;

use super::page;
use super::page_parts::key_page;
use crate::console::error::ConsoleError;
use crate::console::forms::{FormErrors, utc_date_time};
use crate::console::respond::see_other;
use crate::console::session::CsrfForm;
use crate::console::session::SignedIn;
use crate::control::{
    ControlError, DEFAULT_OLD_KEY_GRACE_MS, KeyInput, Reveal, RotateInput, rfc3339,
};
use crate::state::AppState;
use crate::store::now_ms;

#[derive(Debug, Default, Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    pub label: String,
    /// A `datetime-local` value, read as UTC; empty: never expires.
    #[serde(default)]
    pub expires_at: String,
    #[serde(default)]
    pub csrf: SecretString,
}

#[derive(Debug, Default, Deserialize)]
pub struct RotateForm {
    /// How long the old key keeps working: `now`, or a number of hours.
    #[serde(default)]
    pub old_key_valid_for: String,
    #[serde(default)]
    pub csrf: SecretString,
}

/// `POST /apps/{slug}/keys`: 303 to the application's page, which shows the key once.
pub async fn create(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    form: web::Form<KeyForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let input = KeyInput {
        label: Some(form.label.clone()),
        expires_at: utc_date_time(&form.expires_at),
    };
    let page = key_page(&slug);
    let reveal = Reveal::OnPage {
        session: &signed_in.token,
        page: &page,
    };
    match state
        .control
        .create_key(&signed_in.actor, &slug, input, reveal)
        .await
    {
        Ok(_) => Ok(see_other(&format!("/apps/{slug}#new-key"))),
        Err(ControlError::Invalid(errors)) => {
            page::with_errors(&state, &signed_in, &slug, |page| {
                page.key_label = form.label;
                page.key_expires_at = form.expires_at;
                page.key_errors = FormErrors::from_fields(&errors);
            })
            .await
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /apps/{slug}/keys/{id}/rotate`: a new key (shown once on the page the answer
/// redirects to) with the old one's label; the old one works for the time chosen.
pub async fn rotate(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String)>,
    form: web::Form<RotateForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, id) = path.into_inner();
    let old_key_expires_at = match form.old_key_valid_for.trim() {
        "now" => "now".to_owned(),
        "" => rfc3339(now_ms() + DEFAULT_OLD_KEY_GRACE_MS),
        hours => match hours.parse::<i64>() {
            Ok(h @ 1..=720) => rfc3339(now_ms() + h * 3_600_000),
            _ => {
                return Err(ConsoleError::BadRequest(format!(
                    "old_key_valid_for must be \"now\" or 1 to 720 hours, not {hours:?}"
                )));
            }
        },
    };
    let input = RotateInput {
        old_key_expires_at: Some(old_key_expires_at),
        expires_at: None,
    };
    let page = key_page(&slug);
    let reveal = Reveal::OnPage {
        session: &signed_in.token,
        page: &page,
    };
    state
        .control
        .rotate_key(&signed_in.actor, &slug, &id, input, reveal)
        .await?;
    Ok(see_other(&format!("/apps/{slug}?done=key-rotated#new-key")))
}

/// `POST /apps/{slug}/keys/{id}/revoke`
pub async fn revoke(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let (slug, id) = path.into_inner();
    state
        .control
        .revoke_key(&signed_in.actor, &slug, &id)
        .await?;
    Ok(see_other(&format!("/apps/{slug}?done=key-revoked#keys")))
}
