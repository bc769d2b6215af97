//! Who is calling the APIs: the bearer token of a request, an application's API key (the
//! acquire API) and a user's personal access token (the admin API), as extractors, so a
//! handler without a valid one never runs.

use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::http::Method;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::{Either, LocalBoxFuture, Ready, ready};

use super::problem::Problem;
use crate::acquire::{Acquirer, KeyRefused, REVOKED};
use crate::auth::Actor;
use crate::control::{TokenRefused, rfc3339};
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
/// snapshot: no SQL; a key created elsewhere a moment ago is looked up in Redis, see
/// `acquire::new_keys`); 401 without a live one.
pub struct ApiClient(pub Arc<KeyEntry>);

impl FromRequest for ApiClient {
    type Error = Problem;
    /// Ready for a key the snapshot decides (every request but the first few with a new
    /// key): no future is boxed on the acquire path.
    type Future =
        Either<Ready<Result<Self, Problem>>, LocalBoxFuture<'static, Result<Self, Problem>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let Some(presented) = bearer(req) else {
            return Either::Left(ready(Err(Problem::unauthorized(
                "send your API key as Authorization: Bearer <key>",
            ))));
        };
        let Some(acquirer) = req.app_data::<web::Data<Acquirer>>() else {
            return Either::Left(ready(Err(Problem::internal())));
        };
        match acquirer.client(presented) {
            Err(KeyRefused::Unknown) => {
                let (acquirer, presented) = (acquirer.clone(), presented.to_owned());
                Either::Right(Box::pin(async move {
                    let known = acquirer.announced_client(&presented).await;
                    known.map(ApiClient).map_err(refusal)
                }))
            }
            known => Either::Left(ready(known.map(ApiClient).map_err(refusal))),
        }
    }
}

fn refusal(refused: KeyRefused) -> Problem {
    match refused {
        KeyRefused::Unknown => Problem::unauthorized("unknown or revoked API key"),
        KeyRefused::Revoked => Problem::unauthorized(REVOKED),
        KeyRefused::Expired { at_ms } => Problem::unauthorized(format!(
            "this API key expired at {}; use its replacement or make a new one",
            rfc3339(at_ms)
        )),
    }
}

/// The user behind the request's personal access token; 401 without a live one.
pub struct AdminActor(pub Actor);

impl FromRequest for AdminActor {
    type Error = Problem;
    type Future = LocalBoxFuture<'static, Result<Self, Problem>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let token = bearer(req).map(str::to_owned);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        let reads = matches!(*req.method(), Method::GET | Method::HEAD);
        Box::pin(async move {
            let token = token.ok_or_else(|| {
                Problem::unauthorized(
                    "send a personal access token as Authorization: Bearer <token>",
                )
            })?;
            let state = state.ok_or_else(Problem::internal)?;
            match state.control.actor_for_token(&token).await? {
                Ok(actor) if actor.read_only && !reads => Err(Problem::forbidden(
                    "this access token is read-only: it may read (GET) and change nothing; \
                     make a token that is not read-only to change things",
                )),
                Ok(actor) => Ok(AdminActor(actor)),
                Err(TokenRefused::Unknown) => {
                    Err(Problem::unauthorized("unknown or revoked access token"))
                }
                Err(TokenRefused::Expired { at_ms }) => Err(Problem::unauthorized(format!(
                    "this access token expired at {}; make a new one",
                    rfc3339(at_ms)
                ))),
            }
        })
    }
}
