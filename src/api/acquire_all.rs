//! `POST /v1/acquire` with `all`: several acquires decided all or nothing (and checks,
//! `permits: 0`). Parsed here into [`AllItem`]s, decided by the [`Acquirer`], rendered
//! with one single-acquire reply per item; the RateLimit headers tell of the most
//! restrictive item.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::acquire::{AcquireReply, ratelimit_headers, refused, retry_after};
use super::problem::Problem;
use crate::acquire::{AcquiredAll, Acquirer, AllItem, AllRefused};
use crate::domain::{AppSlug, CallerKey, CheckOrPermits, FieldError, PolicyName};

/// The most items one call may hold.
pub const MAX_ITEMS: usize = 16;

/// One item of `all`: an acquire as a single one is asked for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AllItemRequest {
    /// The policy name.
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, pattern = "^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")]
    pub resource: Option<String>,
    /// Defaults to 1; 0 is a check (whether one permit would be granted, taking nothing).
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(nullable = false, minimum = 0, maximum = 1000000000)]
    pub permits: Option<i64>,
    /// Whose bucket, on a `per_key` policy (required there, refused elsewhere).
    #[serde(default, deserialize_with = "crate::control::not_null")]
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]+$"
    )]
    pub key: Option<String>,
}

/// The reply of an `all` acquire: `allowed` when every item is granted; each item's own
/// reply, in order. In a denied call nothing was taken: an item that was granted and given
/// back says so with its bucket's remaining permits as they are.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)] // (for the schema: no other field, unlike AcquireReply)
pub struct AcquireAllReply {
    pub allowed: bool,
    pub results: Vec<AcquireReply>,
}

/// The items of `all`, checked: 1 to [`MAX_ITEMS`], each a valid acquire, no two on the
/// same resource and key. A 400 or 422 names the item's field (`all[2].permits`).
pub(super) fn parse_items(items: Vec<AllItemRequest>) -> Result<Vec<AllItem>, Problem> {
    if items.is_empty() || items.len() > MAX_ITEMS {
        return Err(Problem::invalid(
            FieldError::new(
                "all",
                format!(
                    "must hold 1 to {MAX_ITEMS} items (it holds {})",
                    items.len()
                ),
            )
            .into(),
        ));
    }
    let mut parsed: Vec<AllItem> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let field = |name: &str| format!("all[{i}].{name}");
        let resource = field("resource");
        let name = match item.resource {
            None => {
                return Err(Problem::malformed(format!("{resource} is required"))
                    .with_fields(FieldError::new(&resource, "is required").into()));
            }
            Some(r) => PolicyName::parse_field(&resource, &r)
                .map_err(|e| Problem::malformed(e.to_string()).with_fields(e.into()))?,
        };
        let permits = CheckOrPermits::parse_field(&field("permits"), item.permits.unwrap_or(1))
            .map_err(|e| Problem::invalid(e.into()))?;
        let key = item
            .key
            .map(|k| CallerKey::parse_field(&field("key"), &k))
            .transpose()
            .map_err(|e| Problem::invalid(e.into()))?;
        if let Some(j) = parsed
            .iter()
            .position(|earlier| earlier.name == name && earlier.key == key)
        {
            return Err(Problem::invalid(
                FieldError::new(
                    format!("all[{i}]"),
                    format!("names the same resource and key as all[{j}]: one item each"),
                )
                .into(),
            ));
        }
        parsed.push(AllItem { name, permits, key });
    }
    Ok(parsed)
}

/// Decides the items and renders the reply, or the first refused item's problem.
pub(super) async fn acquire_all(
    acquirer: &Acquirer,
    app: &AppSlug,
    items: &[AllItem],
) -> Result<HttpResponse, Problem> {
    match acquirer.acquire_all(app, items).await {
        Ok(all) => Ok(render(items, &all)),
        Err(AllRefused { index, refusal }) => {
            Err(of_item(refused(refusal, &items[index].name, app), index))
        }
    }
}

/// A refused item's problem, naming the item: `all[1]: no policy named ...`, and its
/// field as `all[1].permits`.
fn of_item(mut problem: Problem, index: usize) -> Problem {
    problem.detail = format!("all[{index}]: {}", problem.detail).into_boxed_str();
    for error in &mut problem.errors {
        error.field = format!("all[{index}].{}", error.field);
    }
    problem.field = problem.errors.first().map(|e| e.field.clone());
    problem
}

/// 200 or 429 with every item's reply; the RateLimit headers (and `Retry-After` when
/// denied) of the most restrictive item decided by Redis.
fn render(items: &[AllItem], all: &AcquiredAll) -> HttpResponse {
    let reply = AcquireAllReply {
        allowed: all.allowed,
        results: all
            .results
            .iter()
            .map(|r| AcquireReply::from(&r.outcome))
            .collect(),
    };
    let status = if all.allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let mut response = HttpResponse::build(status).json(reply);
    let Some((index, decided)) = all.most_restrictive() else {
        return response;
    };
    let partition = all.results[index].partition.as_ref();
    let headers = response.headers_mut();
    for (name, value) in ratelimit_headers(&items[index].name, decided, partition) {
        headers.insert(name, value);
    }
    if !decided.decision.allowed() {
        headers.insert(header::RETRY_AFTER, retry_after(decided));
    }
    response
}
