//! An application's page: its policies with their live state, its members and its API
//! keys, with the owners' forms. The live state is also served as JSON for the page's
//! script. The forms' handlers (`members`, `keys`) re-render this page with their errors.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, CacheControl, CacheDirective};
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::console::error::ConsoleError;
use crate::console::format::{ago, friendly_name, number, readable_limit, short_time};
use crate::console::forms::FormErrors;
use crate::console::page::{Chrome, Notice};
use crate::console::session::SignedIn;
use crate::console::{render, render_status};
use crate::control::{AppDetail, CreatedKey, LivePolicy, PolicyView};
use crate::domain::Scope;
use crate::state::AppState;
use crate::store::now_ms;

/// One row of the policies table.
pub struct PolicyRow {
    pub name: String,
    /// ", for each key" on a keyed policy: whose bucket the limit is.
    pub scope_note: &'static str,
    pub algorithm: &'static str,
    pub rate: String,
    pub max_permits: i64,
    pub allowed_apps: String,
    pub failure_mode: &'static str,
    pub enabled: bool,
    pub version: i64,
    pub current: String,
    pub full_in: String,
    pub recent: String,
}

impl PolicyRow {
    fn new(policy: &PolicyView, live: Option<&LivePolicy>) -> Self {
        let state = live.and_then(|l| l.state.as_ref());
        let (granted, denied) = live.map_or((0, 0), |l| {
            l.activity
                .iter()
                .fold((0, 0), |(g, d), m| (g + m.granted, d + m.denied))
        });
        Self {
            name: policy.name.clone(),
            scope_note: match policy.scope {
                Scope::Global => "",
                Scope::PerApp => ", for each app",
                Scope::PerKey => ", for each key",
            },
            algorithm: friendly_name(policy.algorithm.as_str()),
            rate: readable_limit(policy),
            max_permits: policy.max_permits,
            allowed_apps: policy.allowed_apps.join(", "),
            failure_mode: friendly_name(policy.failure_mode.as_str()),
            enabled: policy.enabled,
            version: policy.version,
            current: state.map_or("–".to_owned(), |s| number(s.current_permits.floor())),
            full_in: live
                .and_then(|l| l.full_in_ms)
                .map_or("–".to_owned(), full_in_text),
            recent: format!("{granted} granted, {denied} denied"),
        }
    }
}

/// "full", "in 3 s", "in 2 min".
pub fn full_in_text(ms: i64) -> String {
    match ms {
        ..=0 => "full".to_owned(),
        1..=59_999 => format!("in {} s", (ms + 999) / 1000),
        60_000..=3_599_999 => format!("in {} min", (ms + 59_999) / 60_000),
        _ => format!("in {} h", (ms + 3_599_999) / 3_600_000),
    }
}

pub struct KeyRow {
    pub id: String,
    pub label: String,
    pub created_by: String,
    pub created: String,
    pub last_used: String,
    pub revoked: Option<String>,
}

/// What was typed into the add-member form, shown again with its errors.
#[derive(Debug, Default)]
pub struct MemberDraft {
    pub username: String,
    pub role: String,
}

#[derive(Template)]
#[template(path = "apps/show.html")]
pub struct AppPage {
    pub chrome: Chrome,
    pub app: AppDetail,
    pub can_edit: bool,
    pub policies: Vec<PolicyRow>,
    pub keys: Vec<KeyRow>,
    pub new_key: Option<CreatedKey>,
    pub member_form: MemberDraft,
    pub member_errors: FormErrors,
    pub key_label: String,
    pub key_errors: FormErrors,
}

impl AppPage {
    /// The page as the actor may see it, with what the caller fills in on top.
    pub async fn load(
        state: &AppState,
        signed_in: &SignedIn,
        slug: &str,
    ) -> Result<Self, ConsoleError> {
        let actor = &signed_in.actor;
        let app = state.control.get_app(actor, slug).await?;
        let policies = state.control.list_policies(actor, Some(slug)).await?;
        let live = state.control.live_state_of(&policies).await;
        let now = now_ms();
        let keys = app
            .keys
            .iter()
            .map(|k| KeyRow {
                id: k.id.clone(),
                label: k.label.clone(),
                created_by: k.created_by.clone(),
                created: short_time(&k.created_at),
                last_used: k
                    .last_used_at
                    .as_deref()
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .map_or("never".to_owned(), |t| {
                        ago(t.timestamp_millis(), now).to_string()
                    }),
                revoked: k.revoked_at.as_deref().map(short_time),
            })
            .collect();
        Ok(Self {
            chrome: signed_in.chrome("apps"),
            can_edit: app.may_edit,
            policies: policies
                .iter()
                .map(|p| PolicyRow::new(p, live.iter().find(|l| l.name == p.name)))
                .collect(),
            keys,
            app,
            new_key: None,
            member_form: MemberDraft::default(),
            member_errors: FormErrors::default(),
            key_label: String::new(),
            key_errors: FormErrors::default(),
        })
    }
}

/// The page again with a form's errors (422), keeping what was typed.
pub async fn with_errors(
    state: &AppState,
    signed_in: &SignedIn,
    slug: &str,
    fill: impl FnOnce(&mut AppPage),
) -> Result<HttpResponse, ConsoleError> {
    let mut page = AppPage::load(state, signed_in, slug).await?;
    fill(&mut page);
    render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
}

pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    notice: web::Query<Notice>,
) -> Result<HttpResponse, ConsoleError> {
    let mut page = AppPage::load(&state, &signed_in, &slug).await?;
    page.chrome = page.chrome.with_notice(&notice);
    render(&page)
}

/// `GET /apps/{slug}/live`: the live state of its policies, for the page's script.
pub async fn live(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
) -> Result<HttpResponse, ConsoleError> {
    let live = state.control.live_policies(&signed_in.actor, &slug).await?;
    let policies: Vec<_> = live
        .iter()
        .map(|l| {
            serde_json::json!({
                "name": l.name,
                "current": l.state.as_ref().map(|s| number(s.current_permits.floor())),
                "max_permits": l.state.as_ref().map(|s| s.max_permits),
                "full_in": l.full_in_ms.map(full_in_text),
                "activity": l.activity,
            })
        })
        .collect();
    Ok(HttpResponse::Ok()
        .insert_header(CacheControl(vec![CacheDirective::NoStore]))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .json(serde_json::json!({ "policies": policies })))
}
