//! Applications: the list, and creating one (admins).

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use crate::console::error::ConsoleError;
use crate::console::forms::FormErrors;
use crate::console::page::{Chrome, Notice};
use crate::console::recent::Recent;

use super::attention::{AttentionRow, needing_attention};
use crate::console::respond::{render, render_status, see_other};
use crate::console::session::SignedIn;
use crate::control::{AppInput, AppView, ControlError};
use crate::state::AppState;

#[derive(Template)]
#[template(path = "apps/list.html")]
struct AppsPage {
    chrome: Chrome,
    apps: Vec<AppView>,
    /// Per application (same order): its counts over the last minutes; `None` when
    /// Redis cannot be reached.
    activity: Option<Vec<Recent>>,
    can_create: bool,
    /// Whether the user may change some application's policies (and so apply a file).
    can_apply: bool,
    /// The policies denying, refusing or that would deny now across these applications,
    /// worst first, and how many there are in all.
    attention: Vec<AttentionRow>,
    attention_count: usize,
    form: AppForm,
    errors: FormErrors,
}

impl AppsPage {
    /// The activity of the `i`-th application: (badge class, badge words, counts in words).
    fn activity_of(&self, i: &usize) -> Option<(&'static str, String, String)> {
        let recent = self.activity.as_ref()?.get(*i)?;
        let badge = recent.badge();
        Some((badge.class, badge.text, recent.words()))
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct AppForm {
    #[serde(default)]
    pub slug: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub csrf: SecretString,
}

pub async fn list(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    notice: web::Query<Notice>,
) -> Result<HttpResponse, ConsoleError> {
    let apps = state.control.list_apps(&signed_in.actor).await?;
    let slugs: Vec<&str> = apps.iter().map(|a| a.slug.as_str()).collect();
    let activity: Option<Vec<Recent>> = state.control.apps_activity(&slugs).await.map(|counts| {
        counts
            .iter()
            .map(|c| Recent::of(std::slice::from_ref(c)))
            .collect()
    });
    let actor = &signed_in.actor;
    let (attention, attention_count) = match &activity {
        Some(activity) => needing_attention(&state.control, actor, &apps, activity).await?,
        None => (Vec::new(), 0),
    };
    let can_apply = actor.is_admin || !state.control.editable_apps(actor).await?.is_empty();
    render(&AppsPage {
        chrome: signed_in.chrome("apps").with_notice(&notice),
        can_create: signed_in.actor.is_admin,
        can_apply,
        apps,
        activity,
        attention,
        attention_count,
        form: AppForm::default(),
        errors: FormErrors::default(),
    })
}

pub async fn create(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    form: web::Form<AppForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    let input = AppInput {
        slug: Some(form.slug.trim().to_owned()),
        name: Some(form.name.clone()),
        description: Some(form.description.clone()),
    };
    let errors = match state.control.create_app(&signed_in.actor, input).await {
        Ok(app) => {
            return Ok(see_other(&format!("/apps/{}?done=app-created", app.slug)));
        }
        Err(ControlError::Invalid(errors)) => FormErrors::from_fields(&errors),
        Err(ControlError::Conflict(message)) => FormErrors::general(message),
        Err(e) => return Err(e.into()),
    };
    let apps = state.control.list_apps(&signed_in.actor).await?;
    let page = AppsPage {
        chrome: signed_in.chrome("apps"),
        can_create: true,
        can_apply: signed_in.actor.is_admin,
        apps,
        // A form sent back with its errors: the activity is not what the page is for.
        activity: None,
        attention: Vec::new(),
        attention_count: 0,
        form,
        errors,
    };
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}
