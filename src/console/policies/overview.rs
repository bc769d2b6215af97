//! A policy's own page: its limits, scope and overrides, who is being limited (the top
//! callers over the last 5 and 60 minutes), how a gateway asks about it, and the support
//! tools: the live state of one
//! caller's bucket ("look up a key", a GET, so a link can point at it) and, for its
//! owners, a reset of that bucket to full (a POST with the CSRF token, audited).
//!
//! Redis being unreachable does not fail the page: the parts read from it say so.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use secrecy::SecretString;
use serde::Deserialize;

use crate::console::chart::UsageChart;
use crate::console::error::ConsoleError;
use crate::console::format::{number, readable_limit, readable_rate, readable_window, url_encode};
use crate::console::page::{Chrome, Notice};
use crate::console::respond::{render_status, see_other};
use crate::console::session::SignedIn;
use crate::control::{ControlError, OverrideView, PolicyView, TOP_SPANS, TopCallers};
use crate::domain::{Mode, Scope, non_utf8_field};
use crate::state::AppState;
use ratekeeper_limiter::{CallerCount, MinuteCounts};

use super::gateway::GatewayPart;
use super::history::HistoryPartial;
use super::overrides_text;
use crate::console::apps::policy_table::full_in_text;

#[derive(Debug, Default, Deserialize)]
pub struct OverviewQuery {
    key: Option<String>,
    #[serde(flatten)]
    notice: Notice,
}

#[derive(Debug, Deserialize)]
pub struct ResetForm {
    #[serde(default)]
    key: String,
    #[serde(default)]
    csrf: SecretString,
}

/// One bucket as the page shows it.
pub struct BucketRow {
    /// The caller looked up; `None` for a global policy's single bucket.
    pub caller: Option<String>,
    pub current: String,
    pub max_permits: i64,
    pub full_in: String,
    /// The override that gives this caller other limits, as its form line.
    pub overridden: Option<String>,
    /// A looked-up caller's last hour, minute by minute, and since when it is denied.
    pub hour: Option<CallerHour>,
}

/// One caller's acquires over the last hour (from the top callers).
pub struct CallerHour {
    pub chart: UsageChart,
    /// "first denied at 14:32 UTC (and in 5 of the 60 minutes)", or that it was not.
    pub denials: String,
}

impl CallerHour {
    fn of(minutes: &[MinuteCounts]) -> Self {
        let denied_minutes: Vec<&MinuteCounts> = minutes.iter().filter(|m| m.denied > 0).collect();
        let at = |m: &MinuteCounts| {
            chrono::DateTime::from_timestamp(m.minute * 60, 0)
                .map_or_else(String::new, |t| t.format("%H:%M UTC").to_string())
        };
        let denials = match (denied_minutes.first(), denied_minutes.last()) {
            (Some(first), Some(last)) => format!(
                "Denied in {} of the last 60 minutes: first at {}, last at {}.",
                denied_minutes.len(),
                at(first),
                at(last)
            ),
            _ => "Not denied in the last 60 minutes.".to_owned(),
        };
        Self {
            chart: UsageChart::new("This caller, last hour", "1 minute", "60 min ago", minutes),
            denials,
        }
    }
}

/// One span's top callers, or why they cannot be shown.
pub struct TopSpan {
    pub minutes: i64,
    pub top: Option<TopCallers>,
}

impl TopSpan {
    /// Denials first: the page is for finding who is being limited. Would-be denials (of
    /// shadow mode) come first when there are any: they are what the page is for then.
    fn by_outcome(&self) -> Vec<(&'static str, &[CallerCount])> {
        self.top.as_ref().map_or(Vec::new(), |t| {
            let mut lists = Vec::with_capacity(3);
            if !t.shadow_denied.is_empty() {
                lists.push(("Would have been denied (shadow mode)", &t.shadow_denied[..]));
            }
            lists.push(("Most denied", &t.denied[..]));
            lists.push(("Most granted", &t.granted[..]));
            lists
        })
    }
}

/// One override as a table row: "–" where the policy's own limit applies.
pub struct OverrideRow {
    pub matches: String,
    pub max_permits: String,
    pub limit: String,
}

/// How often the page's script draws the page again (its live sections only).
pub const REFRESH_MS: u64 = 10_000;

#[derive(Template)]
#[template(path = "policies/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    /// When the page was drawn ("21:10:05 UTC"; RFC 3339 for its `<time>`): the page's
    /// script draws it again every [`REFRESH_MS`].
    as_of: String,
    as_of_iso: String,
    policy: PolicyView,
    limit: String,
    can_edit: bool,
    overrides: Vec<OverrideRow>,
    /// What the key box holds (as typed).
    key: String,
    bucket: Option<BucketRow>,
    /// Why the bucket is not shown: a bad key, or Redis unreachable.
    bucket_error: Option<String>,
    tops: Vec<TopSpan>,
    /// How full the policy's one bucket is (not for a keyed policy).
    gauge: Option<Gauge>,
    /// Granted and denied over the last hour, day and week; empty when Redis cannot be
    /// reached.
    charts: Vec<UsageChart>,
    /// The newest versions, with rollback for those who may edit.
    history: HistoryPartial,
    /// How a gateway (Envoy) asks about this policy.
    gateway: GatewayPart,
}

/// How full a bucket is, at a glance.
pub struct Gauge {
    pub current: f64,
    pub max_permits: i64,
}

impl Gauge {
    pub fn current_text(&self) -> String {
        number(self.current.floor())
    }

    /// A CSS class and words for how close the bucket is to its limit.
    pub fn status(&self) -> (&'static str, &'static str) {
        limit_status(self.current, self.max_permits)
    }
}

/// "at-limit" below one permit, "near-limit" below a fifth of the capacity, else "ok",
/// with the words a badge shows.
pub fn limit_status(current: f64, max_permits: i64) -> (&'static str, &'static str) {
    if current < 1.0 {
        ("at-limit", "At its limit")
    } else if current < max_permits as f64 / 5.0 {
        ("near-limit", "Near its limit")
    } else {
        ("ok", "Has room")
    }
}

impl OverviewPage {
    fn keyed(&self) -> bool {
        self.policy.scope.is_keyed()
    }

    /// Whether to speak of shadow mode's would-be denials: the policy is in shadow mode,
    /// or was while the charts were counting.
    fn shadow_seen(&self) -> bool {
        self.policy.mode == Mode::Shadow || self.charts.iter().any(|c| c.shadow_denied > 0)
    }

    /// What a caller of this policy is called on the page.
    fn caller_word(&self) -> &'static str {
        match self.policy.scope {
            Scope::PerApp => "application",
            _ => "key",
        }
    }

    /// The same with its article: "an application", "a key".
    fn caller_with_article(&self) -> &'static str {
        match self.policy.scope {
            Scope::PerApp => "an application",
            _ => "a key",
        }
    }

    /// The same, heading a column or a fact.
    fn caller_title(&self) -> &'static str {
        match self.policy.scope {
            Scope::PerApp => "Application",
            _ => "Key",
        }
    }

    fn scope_text(&self) -> &'static str {
        match self.policy.scope {
            Scope::Global => "global: one bucket shared by every allowed application",
            Scope::PerApp => "per app: each calling application has a bucket of its own",
            Scope::PerKey => "per key: each key a client names has a bucket of its own",
        }
    }

    fn path(&self) -> String {
        format!("/policies/{}", self.policy.name)
    }

    /// The page looking up `caller`, for the top callers' links.
    fn lookup_href(&self, caller: &CallerCount) -> String {
        format!("{}/overview?key={}", self.path(), url_encode(&caller.key))
    }
}

impl From<&OverrideView> for OverrideRow {
    fn from(o: &OverrideView) -> Self {
        let limit = match (o.rate, o.window_ms, o.lease_ttl_ms) {
            (Some(rate), _, _) => readable_rate(rate),
            (None, Some(w), _) => format!("per {}", readable_window(w)),
            (None, None, Some(l)) => format!("leases up to {}", readable_window(l)),
            (None, None, None) => "–".to_owned(),
        };
        Self {
            matches: o.matches.clone(),
            max_permits: o.max_permits.map_or("–".to_owned(), |m| m.to_string()),
            limit,
        }
    }
}

/// `GET /policies/{name}/overview[?key=]`.
pub async fn show(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    request: HttpRequest,
    query: web::Query<OverviewQuery>,
) -> Result<HttpResponse, ConsoleError> {
    // `?key=%ff` would otherwise look up the caller U+FFFD.
    if let Some(field) = non_utf8_field(request.query_string()) {
        return Err(ConsoleError::BadRequest(format!(
            "The address asks for something this page cannot show: its {field} is not text."
        )));
    }
    let query = query.into_inner();
    let key = query.key.unwrap_or_default();
    let (mut page, status) = match load(&state, &signed_in, &name, key).await {
        Err(e @ ConsoleError::NotFound(_)) => {
            return super::deleted::page_or_not_found(&state, &signed_in, &name, e).await;
        }
        loaded => loaded?,
    };
    page.chrome = page.chrome.with_notice(&query.notice);
    render_status(&page, status)
}

/// `POST /policies/{name}/reset`: one caller's bucket back to full (owners).
pub async fn reset(
    state: web::Data<AppState>,
    signed_in: SignedIn,
    name: web::Path<String>,
    form: web::Form<ResetForm>,
) -> Result<HttpResponse, ConsoleError> {
    signed_in.check_csrf(&form.csrf)?;
    let form = form.into_inner();
    match state
        .control
        .reset_bucket(&signed_in.actor, &name, &form.key)
        .await
    {
        Ok(()) => Ok(see_other(&format!(
            "/policies/{name}/overview?key={}&done=bucket-reset",
            url_encode(&form.key)
        ))),
        Err(ControlError::Invalid(errors)) => {
            let (mut page, _) = load(&state, &signed_in, &name, form.key).await?;
            page.bucket = None;
            page.bucket_error = Some(field_messages(&errors));
            render_status(&page, StatusCode::UNPROCESSABLE_ENTITY)
        }
        Err(e) => Err(e.into()),
    }
}

/// A bucket as the page's facts show it: `caller` for a keyed policy's looked-up one.
fn bucket_row(
    policy: &PolicyView,
    caller: Option<&str>,
    s: &ratekeeper_limiter::BucketState,
    hour: Option<&[MinuteCounts]>,
) -> BucketRow {
    BucketRow {
        caller: caller.map(str::to_owned),
        current: number(s.current_permits.floor()),
        max_permits: s.max_permits,
        full_in: full_in_text(s.full_in_ms),
        overridden: policy
            .overrides
            .iter()
            .find(|o| Some(o.matches.as_str()) == caller)
            .map(|o| overrides_text::render(std::slice::from_ref(o))),
        hour: hour.map(CallerHour::of),
    }
}

fn field_messages(errors: &crate::domain::FieldErrors) -> String {
    errors
        .0
        .iter()
        .map(|e| format!("The {} {}", e.field, e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The page for `key` (empty: none looked up), with the status it answers: 422 when the
/// key cannot name a caller of this policy.
async fn load(
    state: &AppState,
    signed_in: &SignedIn,
    name: &str,
    key: String,
) -> Result<(OverviewPage, StatusCode), ConsoleError> {
    let actor = &signed_in.actor;
    let policy = state.control.get_policy(actor, name).await?;
    // A member of an application the policy allows may see it, but not its owner's
    // application: then there is nothing to edit.
    let can_edit = match state.control.get_app(actor, &policy.owner_app).await {
        Ok(app) => app.may_edit,
        Err(ControlError::Forbidden) => false,
        Err(e) => return Err(e.into()),
    };
    let history = HistoryPartial::of(state.control.policy_history(actor, name, None).await?);
    let mut status = StatusCode::OK;
    // One round trip for everything the page reads from Redis, a looked-up caller's
    // bucket included (a key that cannot name a caller is refused before Redis is asked).
    let asked = (policy.scope.is_keyed() && !key.is_empty()).then_some(key.as_str());
    let mut key_error = None;
    let live = match state.control.policy_live(actor, &policy, asked).await {
        Err(ControlError::Invalid(errors)) => {
            status = StatusCode::UNPROCESSABLE_ENTITY;
            key_error = Some(field_messages(&errors));
            state.control.policy_live(actor, &policy, None).await
        }
        other => other,
    };
    // Redis being unreachable does not fail the page; anything else does.
    let live = match live {
        Err(e) if !matches!(e, ControlError::RedisUnavailable(_)) => return Err(e.into()),
        other => other,
    };
    let unreachable = || "Redis cannot be reached right now; try again in a moment.".to_owned();
    let (bucket, bucket_error) = match (&live, key_error) {
        (_, Some(e)) => (None, Some(e)),
        (Err(_), None) => (None, Some(unreachable())),
        (Ok(l), None) => match (&l.state, asked) {
            (Some(s), _) => (
                Some(bucket_row(&policy, asked, s, l.caller_hour.as_deref())),
                None,
            ),
            (None, None) if policy.scope.is_keyed() => (None, None),
            (None, _) => (
                None,
                Some(
                    "Redis does not hold this policy right now; the next sync pass restores it."
                        .to_owned(),
                ),
            ),
        },
    };
    let gauge = match &live {
        Ok(l) => l.state.as_ref().map(|s| Gauge {
            current: s.current_permits,
            max_permits: s.max_permits,
        }),
        Err(_) => None,
    };
    // The versions the history shows, to mark on the charts.
    let saved: Vec<(i64, i64)> = history
        .entries
        .iter()
        .filter_map(|e| {
            let at = chrono::DateTime::parse_from_rfc3339(&e.at_iso).ok()?;
            Some((e.version, at.timestamp_millis()))
        })
        .collect();
    let chart = |title, per_bar, starts, points: &[ratekeeper_limiter::MinuteCounts]| {
        UsageChart::new(title, per_bar, starts, points).with_versions(&saved, points)
    };
    let (charts, tops) = match live {
        Ok(l) => (
            vec![
                chart("Last hour", "1 minute", "60 min ago", &l.hour),
                chart("Last 24 hours", "15 minutes", "24 h ago", &l.day),
                chart("Last 7 days", "1 hour", "7 days ago", &l.week),
            ],
            TOP_SPANS
                .iter()
                .zip(l.top)
                .map(|(&minutes, top)| TopSpan {
                    minutes,
                    top: Some(TopCallers {
                        minutes,
                        granted: top.granted,
                        denied: top.denied,
                        shadow_denied: top.shadow_denied,
                    }),
                })
                .collect(),
        ),
        Err(_) => (
            Vec::new(),
            TOP_SPANS
                .iter()
                .map(|&minutes| TopSpan { minutes, top: None })
                .collect(),
        ),
    };
    let now = chrono::Utc::now();
    let page = OverviewPage {
        chrome: signed_in.chrome("apps"),
        as_of: now.format("%H:%M:%S UTC").to_string(),
        as_of_iso: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        limit: readable_limit(&policy),
        can_edit,
        overrides: policy.overrides.iter().map(OverrideRow::from).collect(),
        key,
        bucket,
        bucket_error,
        tops,
        gauge,
        charts,
        history,
        gateway: GatewayPart::of(&policy),
        policy,
    };
    Ok((page, status))
}
