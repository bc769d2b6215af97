//! The audit log's query string, read by hand so that every bad value gets a sentence a
//! person understands (400), never a deserializer's message; shared by the page and the
//! CSV export so both apply the same filters.

use chrono::{NaiveDate, TimeDelta};

use crate::console::error::ConsoleError;
use crate::console::format::url_encode;
use crate::domain::{AppSlug, PolicyName};
use crate::store::AuditFilter;

/// The filters as given (kept to show them back in the form), and the page.
#[derive(Debug, Default)]
pub struct AuditQuery {
    pub app: String,
    pub user: String,
    pub policy: String,
    /// The changes of one policy file's apply (16 hex characters).
    pub change_set: String,
    /// `YYYY-MM-DD`, UTC, both ends included.
    pub from: String,
    pub to: String,
    pub page: u32,
    from_ms: Option<i64>,
    until_ms: Option<i64>,
}

const MAX_PAGE: u32 = 100_000;

fn bad(message: String) -> ConsoleError {
    ConsoleError::BadRequest(message)
}

/// Midnight (UTC) starting `date`, in Unix ms.
fn day_start(date: NaiveDate) -> i64 {
    date.and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc()
        .timestamp_millis()
}

fn date(label: &str, text: &str) -> Result<Option<NaiveDate>, ConsoleError> {
    if text.is_empty() {
        return Ok(None);
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(Some)
        .map_err(|_| {
            bad(format!(
                "The {label} date must be a date written like 2026-11-22; “{text}” is not one."
            ))
        })
}

impl AuditQuery {
    pub fn parse(query_string: &str) -> Result<Self, ConsoleError> {
        let pairs: Vec<(String, String)> = serde_urlencoded_pairs(query_string)?;
        let mut q = Self {
            page: 1,
            ..Self::default()
        };
        for (key, value) in pairs {
            let value = value.trim().to_owned();
            match key.as_str() {
                "app" => q.app = value,
                "user" => q.user = value,
                "policy" => q.policy = value,
                "change_set" => q.change_set = value,
                "from" => q.from = value,
                "to" => q.to = value,
                "page" if value.is_empty() => {}
                "page" => {
                    q.page = value
                        .parse::<u32>()
                        .ok()
                        .filter(|p| (1..=MAX_PAGE).contains(p))
                        .ok_or_else(|| {
                            bad(format!(
                                "The page must be a whole number from 1 to {MAX_PAGE}; “{value}” is not."
                            ))
                        })?
                }
                // Anything else is no filter of this page; ignoring it changes nothing shown.
                _ => {}
            }
        }
        if !q.app.is_empty() && AppSlug::parse(&q.app).is_err() {
            return Err(bad(format!(
                "No application could be called “{}”: choose one from the list.",
                q.app
            )));
        }
        if !q.policy.is_empty() && PolicyName::parse(&q.policy).is_err() {
            return Err(bad(format!(
                "No policy could be called “{}”: choose one from the list.",
                q.policy
            )));
        }
        if !q.change_set.is_empty()
            && (q.change_set.len() != 16 || !q.change_set.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(bad(format!(
                "“{}” is not the id of a policy file's changes: follow a link from the log.",
                q.change_set
            )));
        }
        if q.user.chars().count() > 64 || q.user.chars().any(char::is_control) {
            return Err(bad(
                "No user could have that name: choose one from the list.".to_owned(),
            ));
        }
        let (from, to) = (date("From", &q.from)?, date("To", &q.to)?);
        if let (Some(f), Some(t)) = (from, to)
            && f > t
        {
            return Err(bad(format!(
                "The From date ({f}) is after the To date ({t}): nothing could match."
            )));
        }
        q.from_ms = from.map(day_start);
        q.until_ms = to.map(|t| day_start(t + TimeDelta::days(1)));
        Ok(q)
    }

    /// Every filter's value as given (empty when not set).
    fn values(&self) -> [&String; 6] {
        [
            &self.app,
            &self.user,
            &self.policy,
            &self.change_set,
            &self.from,
            &self.to,
        ]
    }

    pub fn filtered(&self) -> bool {
        self.values().iter().any(|v| !v.is_empty())
    }

    /// The store's filter for page `self.page` of `per_page` events.
    pub fn filter(&self, per_page: u32) -> AuditFilter {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        AuditFilter {
            app: some(&self.app),
            user: some(&self.user),
            policy: some(&self.policy),
            change_set: some(&self.change_set),
            from_ms: self.from_ms,
            until_ms: self.until_ms,
            visible_apps: None,
            page: self.page,
            per_page,
            peek_next: false,
        }
    }

    /// The filters as a query string (without the page).
    pub fn to_query_string(&self) -> String {
        let mut query = format!(
            "app={}&user={}&policy={}&from={}&to={}",
            url_encode(&self.app),
            url_encode(&self.user),
            url_encode(&self.policy),
            url_encode(&self.from),
            url_encode(&self.to)
        );
        // Only from a link of the log (no field of the form sets it).
        if !self.change_set.is_empty() {
            query.push_str(&format!("&change_set={}", self.change_set));
        }
        query
    }

    /// The export's file name: what it holds, in characters any file system takes.
    pub fn file_name(&self) -> String {
        let mut name = String::from("audit");
        for part in self.values() {
            if !part.is_empty() {
                name.push('-');
                name.extend(part.chars().map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                        c
                    } else {
                        '_'
                    }
                }));
            }
        }
        name.push_str(".csv");
        name
    }
}

/// The query string as (key, value) pairs, percent-decoded.
fn serde_urlencoded_pairs(query_string: &str) -> Result<Vec<(String, String)>, ConsoleError> {
    actix_web::web::Query::<Vec<(String, String)>>::from_query(query_string)
        .map(actix_web::web::Query::into_inner)
        .map_err(|_| bad("The address's query string could not be read.".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(query: &str) -> String {
        match AuditQuery::parse(query) {
            Err(ConsoleError::BadRequest(m)) => m,
            other => panic!("expected a bad request, got {other:?}"),
        }
    }

    #[test]
    fn dates_cover_whole_days() {
        let q = AuditQuery::parse("from=2026-11-01&to=2026-11-01&app=shop").unwrap();
        let f = q.filter(50);
        assert_eq!(f.until_ms.unwrap() - f.from_ms.unwrap(), 86_400_000);
        assert_eq!(f.app.as_deref(), Some("shop"));
        assert_eq!(q.file_name(), "audit-shop-2026-11-01-2026-11-01.csv");
    }

    #[test]
    fn bad_values_are_explained() {
        assert!(message("page=abc").contains("whole number"));
        assert!(message("page=0").contains("whole number"));
        assert!(message("from=yesterday").contains("From date"));
        assert!(message("from=2026-11-02&to=2026-11-01").contains("after the To date"));
        assert!(message("app=Not%20a%20slug").contains("No application"));
        assert!(
            message("policy=%20%2F").contains("No policy")
                || AuditQuery::parse("policy=%20%2F").is_ok()
        );
    }
}
