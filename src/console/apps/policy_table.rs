//! An application's policies table: each row with its live state, at-a-glance status,
//! filtered by name, sorted, and paged (an application may have hundreds of policies).
//! The page renders the rows on screen with their state (one call of one Redis script);
//! the page's script then asks only for the rows whose state changed since (`seen`:
//! a digest per row), so a refresh of an idle page sends almost nothing.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::console::error::ConsoleError;
use crate::console::format::{friendly_name, number, policy_href, readable_limit};
use crate::console::recent::Recent;
use crate::control::{LivePolicy, PolicyView};
use crate::domain::Scope;
use ratekeeper_limiter::MinuteCounts;

/// Rows per page.
pub const PAGE_SIZE: usize = 50;

/// The table's controls, as the query string gives them (all optional).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct TableQuery {
    /// Keep rows whose name contains this (case-insensitive).
    #[serde(default)]
    pub q: String,
    /// `attention` (default: the largest share denied, then would-be denied, first),
    /// `name`, `status` (closest to the limit first) or `denied` (most denied in the last
    /// 10 minutes first).
    #[serde(default)]
    pub sort: String,
    /// `all` (default), `denying`, `would-deny`, `attention` (either, or at its limit) or
    /// `quiet` (no traffic).
    #[serde(default)]
    pub status: String,
    /// 1-based; a string so a bad value gets a message of ours.
    #[serde(default)]
    pub page: String,
    /// The page's digests, in row order, joined by '.': rows that still match are left out
    /// of a live refresh.
    #[serde(default)]
    pub seen: String,
    /// The policies on screen, in row order, joined by ',' (policy names hold no comma):
    /// a live refresh reads only these.
    #[serde(default)]
    pub rows: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Attention,
    Name,
    Status,
    Denied,
}

impl Sort {
    pub const ALL: [(Sort, &'static str, &'static str); 4] = [
        (Sort::Attention, "attention", "Needs attention"),
        (Sort::Name, "name", "Name"),
        (Sort::Status, "status", "Closest to the limit"),
        (Sort::Denied, "denied", "Most denied"),
    ];

    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(s, _, _)| *s == self)
            .map_or("attention", |(_, v, _)| v)
    }
}

/// Which rows the table shows, by how they did over the last minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    All,
    Denying,
    WouldDeny,
    Attention,
    Quiet,
}

impl StatusFilter {
    pub const ALL: [(StatusFilter, &'static str, &'static str); 5] = [
        (StatusFilter::All, "all", "Any"),
        (StatusFilter::Denying, "denying", "Denying or refusing"),
        (StatusFilter::WouldDeny, "would-deny", "Would deny (shadow)"),
        (
            StatusFilter::Attention,
            "attention",
            "Denying, would deny or at its limit",
        ),
        (StatusFilter::Quiet, "quiet", "No traffic"),
    ];

    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(s, _, _)| *s == self)
            .map_or("all", |(_, v, _)| v)
    }

    /// Whether a policy standing so passes.
    pub fn keeps(self, row: &Standing) -> bool {
        match self {
            StatusFilter::All => true,
            StatusFilter::Denying => row.recent.is_denying() || row.recent.is_refusing(),
            StatusFilter::WouldDeny => row.recent.would_deny(),
            StatusFilter::Attention => {
                row.recent.is_denying()
                    || row.recent.is_refusing()
                    || row.recent.would_deny()
                    || row.at_limit
            }
            StatusFilter::Quiet => row.recent.is_idle(),
        }
    }
}

/// How many of the filtered policies deny, would deny, or are at their limit now: the
/// line above the table ("4 of 200 denying").
#[derive(Debug, Clone, Copy, Default)]
pub struct StatusCounts {
    /// The policies counted.
    pub counted: usize,
    pub denying: usize,
    /// Refusing acquires (503) because Redis could not be reached.
    pub refusing: usize,
    pub would_deny: usize,
    pub at_limit: usize,
}

impl StatusCounts {
    pub fn of<'s>(standings: impl IntoIterator<Item = &'s Standing>) -> Self {
        standings.into_iter().fold(Self::default(), |c, r| Self {
            counted: c.counted + 1,
            refusing: c.refusing + usize::from(r.recent.is_refusing()),
            denying: c.denying + usize::from(r.recent.is_denying()),
            would_deny: c.would_deny + usize::from(r.recent.would_deny()),
            at_limit: c.at_limit + usize::from(r.at_limit),
        })
    }
}

/// The controls, checked: every bad value is a 400 that says what is allowed.
#[derive(Debug, Clone)]
pub struct TableView {
    pub filter: String,
    pub sort: Sort,
    pub status: StatusFilter,
    pub page: usize,
}

impl TableView {
    /// No filter, what needs attention first, the first page.
    pub fn first_page() -> Self {
        Self {
            filter: String::new(),
            sort: Sort::Attention,
            status: StatusFilter::All,
            page: 1,
        }
    }

    pub fn parse(query: &TableQuery) -> Result<Self, ConsoleError> {
        let sort = match query.sort.as_str() {
            "" => Sort::Attention,
            s => Sort::ALL
                .iter()
                .find(|(_, value, _)| *value == s)
                .map(|(sort, _, _)| *sort)
                .ok_or_else(|| {
                    ConsoleError::BadRequest(
                        "sort must be one of attention, name, status or denied".to_owned(),
                    )
                })?,
        };
        let status = match query.status.as_str() {
            "" => StatusFilter::All,
            s => StatusFilter::ALL
                .iter()
                .find(|(_, value, _)| *value == s)
                .map(|(status, _, _)| *status)
                .ok_or_else(|| {
                    ConsoleError::BadRequest(
                        "status must be one of all, denying, would-deny, attention or quiet"
                            .to_owned(),
                    )
                })?,
        };
        let page = match query.page.as_str() {
            "" => 1,
            p => p.parse::<usize>().ok().filter(|&p| p >= 1).ok_or_else(|| {
                ConsoleError::BadRequest("page must be a whole number from 1".to_owned())
            })?,
        };
        if query.q.chars().count() > 256 {
            return Err(ConsoleError::BadRequest(
                "the name filter is at most 256 characters".to_owned(),
            ));
        }
        Ok(Self {
            filter: query.q.trim().to_owned(),
            sort,
            status,
            page,
        })
    }

    /// The policies that pass the filter, by name (the order a live sort starts from).
    pub fn filtered<'p, P: Named>(&self, policies: &'p [P]) -> Vec<&'p P> {
        let needle = self.filter.to_lowercase();
        policies
            .iter()
            .filter(|p| needle.is_empty() || p.name().to_lowercase().contains(&needle))
            .collect()
    }

    /// Of the filtered policies, those whose live state the page reads: all of them when
    /// it sorts or filters by state, else the page's.
    pub fn to_read<'p, P>(&self, filtered: &[&'p P]) -> Vec<&'p P> {
        if self.sorts_by_state() {
            filtered.to_vec()
        } else {
            self.by_name_page(filtered)
        }
    }

    /// Whether the order or the status filter needs every filtered policy's live state
    /// (one Redis call either way).
    pub fn sorts_by_state(&self) -> bool {
        self.sort != Sort::Name || self.status != StatusFilter::All
    }

    /// The policies on this page (given in name order, each with how it stands), kept by
    /// the status filter and sorted (by name where they tie); `pages` is the number of
    /// pages (at least 1).
    pub fn page_of<T>(&self, mut rows: Vec<(Standing, T)>) -> (Vec<(Standing, T)>, usize) {
        rows.retain(|(s, _)| self.status.keeps(s));
        match self.sort {
            Sort::Name => {}
            Sort::Attention => {
                rows.sort_by_key(|(s, _)| std::cmp::Reverse((s.recent.attention(), s.at_limit)))
            }
            Sort::Status => rows.sort_by(|(a, _), (b, _)| {
                a.fullness
                    .total_cmp(&b.fullness)
                    .then_with(|| b.recent.denied.cmp(&a.recent.denied))
            }),
            Sort::Denied => rows.sort_by_key(|(s, _)| {
                std::cmp::Reverse((
                    s.recent.denied + s.recent.unavailable,
                    s.recent.shadow_denied,
                ))
            }),
        }
        let pages = rows.len().div_ceil(PAGE_SIZE).max(1);
        let shown = rows
            .into_iter()
            .skip((self.page.min(pages) - 1) * PAGE_SIZE)
            .take(PAGE_SIZE)
            .collect();
        (shown, pages)
    }

    /// The rows of a live-sorted page can only be known from every filtered policy's
    /// state; sorted by name, the page is known before Redis is asked.
    pub fn by_name_page<'p, P>(&self, filtered: &[&'p P]) -> Vec<&'p P> {
        let pages = filtered.len().div_ceil(PAGE_SIZE).max(1);
        filtered
            .iter()
            .skip((self.page.min(pages) - 1) * PAGE_SIZE)
            .take(PAGE_SIZE)
            .copied()
            .collect()
    }

    /// This table's query string with another page (for the pager's links).
    pub fn href_for_page(&self, page: usize) -> String {
        let mut query = vec![format!("page={page}")];
        if self.sort != Sort::Attention {
            query.push(format!("sort={}", self.sort.as_str()));
        }
        if self.status != StatusFilter::All {
            query.push(format!("status={}", self.status.as_str()));
        }
        if !self.filter.is_empty() {
            query.push(format!(
                "q={}",
                crate::console::format::url_encode(&self.filter)
            ));
        }
        format!("?{}#policies", query.join("&"))
    }
}

/// What the table filters by: a policy's name.
pub trait Named {
    fn name(&self) -> &str;
}

impl Named for PolicyView {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Named for crate::control::PolicyScope {
    fn name(&self) -> &str {
        &self.name
    }
}

/// How a policy stands now, from its live state and scope: what the table sorts, filters
/// and counts by (known before the rest of the policy is read).
#[derive(Debug, Clone)]
pub struct Standing {
    /// Counts over the last minutes.
    pub recent: Recent,
    /// "at-limit", "near-limit", "ok", "keyed" or "unknown", and in words.
    pub status: &'static str,
    pub status_text: &'static str,
    /// Permits available over capacity (0 = at its limit); 2 when unknown, so those sort
    /// last.
    pub fullness: f64,
    /// Whether its one bucket is at its limit now (a keyed policy has none).
    pub at_limit: bool,
}

impl Standing {
    pub fn of(scope: Scope, live: Option<&LivePolicy>) -> Self {
        let state = live.and_then(|l| l.state.as_ref());
        let recent = live.map_or_else(Recent::default, |l| Recent::of(&l.activity));
        let (status, status_text, fullness) = match (state, scope.is_keyed()) {
            (Some(s), _) => {
                let (class, text) =
                    crate::console::policies::limit_status(s.current_permits, s.max_permits);
                (class, text, s.current_permits / s.max_permits.max(1) as f64)
            }
            (None, true) if recent.denied > 0 => ("at-limit", "Denying some callers", 0.0),
            (None, true) => ("keyed", "A bucket per caller", 1.0),
            (None, false) => ("unknown", "No live state", 2.0),
        };
        Self {
            recent,
            status,
            status_text,
            fullness,
            at_limit: status == "at-limit" && state.is_some(),
        }
    }
}

/// One row of the policies table.
#[derive(Debug, Clone)]
pub struct PolicyRow {
    pub name: String,
    pub href: String,
    /// ", for each key" on a keyed policy: whose bucket the limit is.
    pub scope_note: &'static str,
    pub algorithm: &'static str,
    pub rate: String,
    pub max_permits: i64,
    pub allowed_apps: String,
    /// The failure mode in a sentence (the tag's title), and as a tag.
    pub failure_mode: &'static str,
    pub failure_short: &'static str,
    pub enabled: bool,
    /// In shadow mode: it denies no one (its would-be denials are on its page).
    pub shadow: bool,
    pub blocked: bool,
    pub version: i64,
    pub live: LiveCells,
}

/// What a live refresh may change in a row.
#[derive(Debug, Clone, Serialize)]
pub struct LiveCells {
    pub name: String,
    pub current: Option<String>,
    pub max_permits: Option<i64>,
    pub full_in: Option<String>,
    /// "at-limit", "near-limit", "ok", "keyed" or "unknown".
    pub status: &'static str,
    pub status_text: &'static str,
    /// "3 granted, 1 denied (25%)", with would-be denials when there are some.
    pub recent: String,
    /// The same in the table's few words: "3 granted, 1 denied".
    pub recent_counts: String,
    /// The badge of the last minutes: its class ("denying", "would-deny", ...) and words.
    pub recent_class: &'static str,
    pub recent_badge: String,
    pub activity: Vec<MinuteCounts>,
    /// A digest of the above: the page's script sends it back as `seen`.
    pub digest: String,
}

/// The rows of `policies` with their live state (`live_state_of`'s answer: one entry per
/// policy, in their order; none where it is short).
pub fn rows_with_live(policies: &[PolicyView], live: &[LivePolicy]) -> Vec<PolicyRow> {
    policies
        .iter()
        .zip(live.iter().map(Some).chain(std::iter::repeat(None)))
        .map(|(p, live)| PolicyRow::new(p, live))
        .collect()
}

/// A row for each live state, in its order, with its stored policy; a policy the
/// database no longer holds (deleted between the reads) is left out.
pub fn rows_in_order(views: &[PolicyView], live: &[LivePolicy]) -> Vec<PolicyRow> {
    let by_name: HashMap<&str, &PolicyView> = views.iter().map(|p| (p.name.as_str(), p)).collect();
    live.iter()
        .filter_map(|l| Some(PolicyRow::new(by_name.get(l.name.as_str())?, Some(l))))
        .collect()
}

impl PolicyRow {
    pub fn new(policy: &PolicyView, live: Option<&LivePolicy>) -> Self {
        let state = live.and_then(|l| l.state.as_ref());
        let activity = live.map(|l| l.activity.clone()).unwrap_or_default();
        let Standing {
            recent,
            status,
            status_text,
            ..
        } = Standing::of(policy.scope, live);
        let mut live = LiveCells {
            name: policy.name.clone(),
            current: state.map(|s| number(s.current_permits.floor())),
            max_permits: state.map(|s| s.max_permits),
            full_in: live.and_then(|l| l.full_in_ms).map(full_in_text),
            status,
            status_text,
            recent: recent.words(),
            recent_counts: recent.counts(),
            recent_class: recent.badge().class,
            recent_badge: recent.badge().text,
            activity,
            digest: String::new(),
        };
        live.digest = digest(&live);
        Self {
            name: policy.name.clone(),
            href: policy_href(&policy.name),
            scope_note: match policy.scope {
                Scope::Global => "",
                Scope::PerApp => ", each app",
                Scope::PerKey => ", each key",
            },
            algorithm: friendly_name(policy.algorithm.as_str()),
            rate: readable_limit(policy),
            max_permits: policy.max_permits,
            allowed_apps: policy.allowed_apps.join(", "),
            failure_mode: friendly_name(policy.failure_mode.as_str()),
            failure_short: match policy.failure_mode.as_str() {
                "open" => "fails open",
                _ => "fails closed",
            },
            enabled: policy.enabled,
            shadow: policy.mode == crate::domain::Mode::Shadow,
            blocked: policy.enabled && policy.mode == crate::domain::Mode::Block,
            version: policy.version,
            live,
        }
    }

    pub fn current_text(&self) -> &str {
        self.live.current.as_deref().unwrap_or("–")
    }

    pub fn full_in_text(&self) -> &str {
        self.live.full_in.as_deref().unwrap_or("–")
    }

    /// The last minutes as a small chart (the page's script redraws it when it changes).
    pub fn sparkline(&self) -> String {
        crate::console::chart::sparkline(&self.live.activity)
    }
}

/// A short digest of what a refresh shows of a row (not a security measure: a changed
/// row whose digest collides is only refreshed a little later).
fn digest(cells: &LiveCells) -> String {
    let mut h = DefaultHasher::new();
    (
        &cells.current,
        cells.max_permits,
        &cells.full_in,
        cells.status,
    )
        .hash(&mut h);
    // The counts only: an idle row's chart is the same from one minute to the next.
    for m in &cells.activity {
        (m.granted, m.denied, m.shadow_denied, m.unavailable).hash(&mut h);
    }
    format!("{:08x}", h.finish() as u32)
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

/// The rows of a refresh whose digest is not the one the page has at their place.
pub fn changed<'r>(rows: &'r [PolicyRow], seen: &str) -> Vec<&'r LiveCells> {
    let seen: Vec<&str> = if seen.is_empty() {
        Vec::new()
    } else {
        seen.split('.').collect()
    };
    rows.iter()
        .enumerate()
        .filter(|(i, r)| seen.get(*i) != Some(&r.live.digest.as_str()))
        .map(|(_, r)| &r.live)
        .collect()
}
