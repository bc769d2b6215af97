//! An application's page: its policies with their live state, its members and its API
//! keys, with the owners' forms. The live state is also served as JSON for the page's
//! script. The forms' handlers (`members`, `keys`) re-render this page with their errors.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, CacheControl, CacheDirective};
use actix_web::{HttpResponse, web};
use askama::Template;

use crate::auth::Actor;
use crate::console::error::ConsoleError;
use crate::console::format::{ago, short_time};
use crate::console::forms::FormErrors;
use crate::console::page::{Chrome, Notice};
use crate::console::recent::Recent;
use crate::console::respond::{render, render_status};
use crate::console::session::SignedIn;
use crate::control::{AppDetail, AppWithLimits, CreatedKey, LivePolicy, PolicyView};
use ratekeeper_limiter::MinuteCounts;

use super::policy_table::{
    PAGE_SIZE, PolicyRow, Standing, StatusCounts, TableQuery, TableView, changed, rows_in_order,
    rows_with_live,
};
use crate::state::AppState;
use crate::store::now_ms;

/// A policy of another application that this one's keys are held to.
pub struct LimitOnApp {
    pub name: String,
    pub href: String,
    pub owner_app: String,
    pub limit: String,
    pub max_permits: i64,
    pub enabled: bool,
    pub shadow: bool,
    /// What it did to this application's acquires over the last minutes; `None` for a
    /// per_key policy (counted by key) or when Redis cannot be reached.
    pub recent: Option<Recent>,
    pub per_key: bool,
}

impl LimitOnApp {
    fn of(p: &PolicyView, counts: Option<MinuteCounts>) -> Self {
        Self {
            recent: counts.map(|c| Recent::of(std::slice::from_ref(&c))),
            ..Self::from(p)
        }
    }
}

impl From<&PolicyView> for LimitOnApp {
    fn from(p: &PolicyView) -> Self {
        let scope = match p.scope {
            crate::domain::Scope::Global => ", shared by every allowed application",
            crate::domain::Scope::PerApp => ", for each application",
            crate::domain::Scope::PerKey => ", for each key",
        };
        Self {
            name: p.name.clone(),
            href: crate::console::format::policy_href(&p.name),
            owner_app: p.owner_app.clone(),
            limit: format!("{}{scope}", crate::console::format::readable_limit(p)),
            max_permits: p.max_permits,
            enabled: p.enabled,
            shadow: p.mode == crate::domain::Mode::Shadow,
            recent: None,
            per_key: p.scope == crate::domain::Scope::PerKey,
        }
    }
}

pub struct KeyRow {
    pub id: String,
    pub label: String,
    /// "rk_key_3fa9…", to tell keys with one label apart.
    pub prefix: Option<String>,
    /// For a key rotated away: "rk_key_cd34…", the key that replaced it.
    pub replaced_by: Option<String>,
    pub created_by: String,
    pub created: String,
    pub last_used: String,
    pub revoked: Option<String>,
    /// "expires 2030-01-31 18:00 UTC", "expired …", or empty.
    pub expiry: String,
    pub expired: bool,
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
    /// The rows on screen.
    pub policies: Vec<PolicyRow>,
    pub table: TableView,
    /// Policies of the application, and of those how many pass the filter.
    pub total: usize,
    pub matching: usize,
    pub pages: usize,
    /// How many of the policies that pass the name filter deny, would deny or are at
    /// their limit (when the table read them all).
    pub status_counts: Option<StatusCounts>,
    /// The application's own counts of the last minutes (its acquires that named no
    /// policy among them); `None` when Redis cannot be reached.
    pub app_recent: Option<Recent>,
    /// Policies of other applications that allow this one.
    pub limits_on_app: Vec<LimitOnApp>,
    /// Keys not revoked (working, or expired), oldest first.
    pub keys: Vec<KeyRow>,
    /// Revoked keys, apart.
    pub revoked_keys: Vec<KeyRow>,
    /// Keys just made by this session, shown this once (post-redirect-get).
    pub new_keys: Vec<CreatedKey>,
    pub member_form: MemberDraft,
    pub member_errors: FormErrors,
    pub key_label: String,
    pub key_expires_at: String,
    pub key_errors: FormErrors,
    pub settings: super::page_parts::SettingsDraft,
    pub settings_errors: FormErrors,
}

impl AppPage {
    /// The page as the actor may see it (its policies table at its first page), with
    /// what the caller fills in on top.
    pub async fn load(
        state: &AppState,
        signed_in: &SignedIn,
        slug: &str,
    ) -> Result<Self, ConsoleError> {
        Self::load_table(state, signed_in, slug, TableView::first_page()).await
    }

    /// The same with the table filtered, sorted and paged as asked.
    pub async fn load_table(
        state: &AppState,
        signed_in: &SignedIn,
        slug: &str,
        table: TableView,
    ) -> Result<Self, ConsoleError> {
        let actor = &signed_in.actor;
        // The table (SQL, then Redis, then SQL for the rows on screen) beside the rest of
        // the page (SQL, then Redis); each asks Redis only once the actor may see the
        // application.
        let (stored, table_rows) = tokio::join!(
            async {
                let stored = state.control.app_with_limits(actor, slug).await?;
                let this_app = [slug];
                let (on_app_counts, app_recent) = tokio::join!(
                    state.control.app_on_policies(slug, &stored.limits_on_app),
                    state.control.apps_activity(&this_app),
                );
                Ok::<_, ConsoleError>((stored, on_app_counts, app_recent))
            },
            table_rows(state, actor, slug, &table),
        );
        let (
            AppWithLimits {
                detail: app,
                limits_on_app,
            },
            on_app_counts,
            app_recent,
        ) = stored?;
        let app_recent = app_recent
            .and_then(|counts| counts.first().map(|c| Recent::of(std::slice::from_ref(c))));
        let TableRows {
            rows,
            total,
            matching,
            pages,
            counts,
        } = table_rows?;
        let now = now_ms();
        let shown_prefix = |p: &str| format!("{p}…");
        let prefix_of = |id: &str| {
            app.keys
                .iter()
                .find(|k| k.id == id)
                .and_then(|k| k.prefix.as_deref())
                .map_or_else(|| "a newer key".to_owned(), shown_prefix)
        };
        let (keys, revoked_keys): (Vec<KeyRow>, Vec<KeyRow>) = app
            .keys
            .iter()
            .map(|k| KeyRow {
                id: k.id.clone(),
                label: k.label.clone(),
                prefix: k.prefix.as_deref().map(shown_prefix),
                replaced_by: k.replaced_by.as_deref().map(prefix_of),
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
                expiry: super::page_parts::expiry_text(k.expires_at.as_deref(), now),
                expired: super::page_parts::has_expired(k.expires_at.as_deref(), now),
            })
            .partition(|k| k.revoked.is_none());
        let settings = super::page_parts::SettingsDraft::of(&app.app);
        Ok(Self {
            chrome: signed_in.chrome("apps"),
            can_edit: app.may_edit,
            policies: rows,
            table,
            total,
            matching,
            pages,
            status_counts: counts,
            app_recent,
            limits_on_app: limits_on_app
                .iter()
                .zip(on_app_counts)
                .map(|(p, counts)| LimitOnApp::of(p, counts))
                .collect(),
            keys,
            revoked_keys,
            app,
            new_keys: Vec::new(),
            member_form: MemberDraft::default(),
            member_errors: FormErrors::default(),
            key_label: String::new(),
            key_expires_at: String::new(),
            key_errors: FormErrors::default(),
            settings,
            settings_errors: FormErrors::default(),
        })
    }
}

impl AppPage {
    /// Other applications' limits that denied, refused or would have denied this
    /// application's acquires over the last minutes, with their badges: the top of the
    /// page names them, as their table may be several screens down.
    pub fn limits_holding_back(&self) -> Vec<(&LimitOnApp, crate::console::recent::Badge)> {
        self.limits_on_app
            .iter()
            .filter_map(|l| {
                let recent = l.recent.as_ref()?;
                (recent.is_denying() || recent.is_refusing() || recent.would_deny())
                    .then(|| (l, recent.badge()))
            })
            .collect()
    }

    /// The sections whose form came back with errors, as (id, title): the top of the
    /// page links to them, as the form itself may be several screens down.
    pub fn sections_with_errors(&self) -> Vec<(&'static str, &'static str)> {
        [
            ("members", "Members", &self.member_errors),
            ("keys", "API keys", &self.key_errors),
            ("settings", "Settings", &self.settings_errors),
        ]
        .into_iter()
        .filter(|(_, _, errors)| !errors.is_empty())
        .map(|(id, title, _)| (id, title))
        .collect()
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

/// The table's rows on screen. First the names and scopes of the application's
/// policies (a small read); then the live state of those the table needs (one Redis call:
/// the page's when sorted by name, else every filtered policy's, which also counts them by
/// status); and the stored rows of the policies on screen only, in the same read
/// transaction. Sorted by name, the page is known at once, so its rows are read from the
/// database while Redis answers.
async fn table_rows(
    state: &AppState,
    actor: &Actor,
    slug: &str,
    table: &TableView,
) -> Result<TableRows, ConsoleError> {
    let mut policies = state.control.app_policies(actor, slug).await?;
    let scopes = std::mem::take(&mut policies.scopes);
    let filtered = table.filtered(&scopes);
    let read = table.to_read(&filtered);
    let live = state
        .control
        .live_state_named(read.iter().map(|p| (p.name.as_str(), p.state_read)));
    if !table.sorts_by_state() {
        let names: Vec<&str> = read.iter().map(|p| p.name.as_str()).collect();
        let (live, views) = tokio::join!(live, policies.named(&names));
        return Ok(TableRows {
            rows: rows_in_order(&views?, &live),
            total: scopes.len(),
            matching: filtered.len(),
            pages: filtered.len().div_ceil(PAGE_SIZE).max(1),
            counts: None,
        });
    }
    let standings: Vec<(Standing, LivePolicy)> = read
        .iter()
        .zip(live.await)
        .map(|(p, live)| (Standing::of(p.scope, Some(&live)), live))
        .collect();
    let counts = StatusCounts::of(standings.iter().map(|(s, _)| s));
    let matching = standings
        .iter()
        .filter(|(s, _)| table.status.keeps(s))
        .count();
    let (shown, pages) = table.page_of(standings);
    let shown: Vec<LivePolicy> = shown.into_iter().map(|(_, live)| live).collect();
    let names: Vec<&str> = shown.iter().map(|l| l.name.as_str()).collect();
    let views = policies.named(&names).await?;
    Ok(TableRows {
        rows: rows_in_order(&views, &shown),
        total: scopes.len(),
        matching,
        pages,
        counts: Some(counts),
    })
}

/// The table's rows on screen and what the page says about the rest.
struct TableRows {
    rows: Vec<PolicyRow>,
    /// Policies of the application.
    total: usize,
    /// Of those, how many pass the filters.
    matching: usize,
    pages: usize,
    /// Of every policy that passes the name filter, when their state was read.
    counts: Option<StatusCounts>,
}

/// The names of a refresh's `rows` (the names on screen, comma-separated, in order);
/// `None` when it names none, or more than a page.
fn on_screen(rows: &str) -> Option<Vec<&str>> {
    let names: Vec<&str> = rows.split(',').filter(|n| !n.is_empty()).collect();
    (!names.is_empty() && names.len() <= PAGE_SIZE).then_some(names)
}

#[derive(Debug, Default, serde::Deserialize)]
pub struct ShowQuery {
    #[serde(flatten)]
    table: TableQuery,
    #[serde(flatten)]
    notice: Notice,
}

pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    query: web::Query<ShowQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let table = TableView::parse(&query.table)?;
    let mut page = AppPage::load_table(&state, &signed_in, &slug, table).await?;
    page.chrome = page.chrome.with_notice(&query.notice);
    page.new_keys = super::page_parts::revealed_keys(&state, &signed_in, &slug).await?;
    let mut response = render(&page)?;
    if !page.new_keys.is_empty() {
        crate::console::respond::no_store(&mut response);
    }
    Ok(response)
}

/// `GET /apps/{slug}/live[?q=&sort=&page=&seen=]`: the live state of the rows on screen,
/// for the page's script; with `seen`, only the rows whose state changed.
pub async fn live(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    slug: web::Path<String>,
    query: web::Query<TableQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let table = TableView::parse(&query)?;
    let actor = &signed_in.actor;
    let rows = match on_screen(&query.rows) {
        // The rows the page shows, in its order: only their state is read, however the
        // page was sorted (its order changes at a reload, not at a refresh).
        Some(names) => {
            let views = state.control.policies_named(actor, &slug, &names).await?;
            let shown: Vec<PolicyView> = names
                .iter()
                .filter_map(|n| views.iter().find(|p| p.name == *n).cloned())
                .collect();
            rows_with_live(&shown, &state.control.live_state_of(&shown).await)
        }
        None => table_rows(&state, actor, &slug, &table).await?.rows,
    };
    let digests: Vec<&str> = rows.iter().map(|r| r.live.digest.as_str()).collect();
    Ok(HttpResponse::Ok()
        .insert_header(CacheControl(vec![CacheDirective::NoStore]))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .json(serde_json::json!({
            "policies": changed(&rows, &query.seen),
            "digests": digests,
        })))
}
