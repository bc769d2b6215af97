//! Who is calling the APIs: the bearer token of a request, an application's API key (the
//! acquire API) and a user's personal access token (the admin API), as extractors, so a
//! handler without a valid one never runs.

use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::{LocalBoxFuture, Ready, ready};

use super::problem::Problem;
use crate::acquire::{Acquirer, KeyRefused};
use crate::auth::Actor;
use crate::control::rfc3339;
use crate::snapshot::KeyEntry;
use crate::state::AppState;

/// The bearer token of a request, if it has one.
pub fn bearer(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(actix_web::http::header::AUTHORIZATION)?;
    let value = value.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The application behind the request's API key (checked against the in-memory
/// snapshot: no SQL); 401 without a live one.
pub struct ApiClient(pub Arc<KeyEntry>);

impl FromRequest for ApiClient {
    type Error = Problem;
    type Future = Ready<Result<Self, Problem>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(api_client(req))
    }
}

fn api_client(req: &HttpRequest) -> Result<ApiClient, Problem> {
    let presented = bearer(req)
        .ok_or_else(|| Problem::unauthorized("send your API key as Authorization: Bearer <key>"))?;
    let acquirer = req
        .app_data::<web::Data<Acquirer>>()
        .ok_or_else(Problem::internal)?;
    acquirer
        .client(presented)
        .map(ApiClient)
        .map_err(|refused| match refused {
            KeyRefused::Unknown => Problem::unauthorized("unknown or revoked API key"),
            KeyRefused::Expired { at_ms } => Problem::unauthorized(format!(
                "this API key expired at {}; use its replacement or make a new one",
                rfc3339(at_ms)
            )),
        })
}

/// The user behind the request's personal access token; 401 without a live one.
pub struct AdminActor(pub Actor);

impl FromRequest for AdminActor {
    type Error = Problem;
    type Future = LocalBoxFuture<'static, Result<Self, Problem>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = bearer(req).map(str::to_owned);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        Box::pin(async move {
            let token = token.ok_or_else(|| {
                Problem::unauthorized(
                    "send a personal access token as Authorization: Bearer <token>",
                )
            })?;
            let state = state.ok_or_else(Problem::internal)?;
            match state.control.actor_for_token(&token).await? {
                Some(actor) => Ok(AdminActor(actor)),
                None => Err(Problem::unauthorized("unknown or revoked access token")),
            }
        })
    }
}
