//! An application's API keys: owners create them (the text shown once) and revoke them.

use actix_web::http::StatusCode;
use actix_web::http::header::{CacheControl, CacheDirective};
use actix_web::{HttpResponse, web};
use secrecy::SecretString;
use serde::Deserialize;

use super::page::{self, AppPage};
use crate::console::error::ConsoleError;
use crate::console::forms::FormErrors;
use crate::console::login::CsrfForm;
use crate::console::session::SignedIn;
use crate::console::{render_status, see_other};
use crate::control::{ControlError, KeyInput};
use crate::state::AppState;

#[derive(Debug, Default, Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    pub label: String,
    #[serde(default)]
    pub csrf: SecretString,
}

/// `POST /apps/{slug}/keys`: the answer is the page with the new key, shown this once.
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
    };
    match state
        .control
        .create_key(&signed_in.actor, &slug, input)
        .await
    {
        Ok(created) => {
            let mut page = AppPage::load(&state, &signed_in, &slug).await?;
            page.new_key = Some(created);
            let mut response = render_status(&page, StatusCode::CREATED)?;
            // The key is in this page and nowhere else: no cache may keep it.
            response.headers_mut().insert(
                actix_web::http::header::CACHE_CONTROL,
                CacheControl(vec![CacheDirective::NoStore])
                    .to_string()
                    .parse()
                    .map_err(anyhow::Error::from)?,
            );
            Ok(response)
        }
        Err(ControlError::Invalid(errors)) => {
            page::with_errors(&state, &signed_in, &slug, |page| {
                page.key_label = form.label;
                page.key_errors = FormErrors::from_fields(&errors);
            })
            .await
        }
        Err(e) => Err(e.into()),
    }
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
