use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use futures_util::future::LocalBoxFuture;

use crate::api::acquire::bearer;
use crate::api::problem::Problem;
use crate::auth::Actor;
use crate::state::AppState;

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
