//! The console shares each instance with the acquire path, whose latency matters far more
//! than a page's. At most `RATEKEEPER_CONSOLE_CONCURRENCY` console requests are worked on
//! at once (by default half the cores, at least one); the others wait their turn without
//! using the CPU. A person clicking around never notices; a dashboard left open in fifty
//! tabs, or a script scraping pages, cannot take more than that share from acquires
//! (bench/console.py measures both sides).

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::web;

use crate::state::AppState;

pub async fn one_share(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let load = req
        .app_data::<web::Data<AppState>>()
        .map(|state| state.console_load.clone());
    // Held until the response is built (the semaphore is never closed).
    let _turn = match load {
        Some(load) => load.acquire_owned().await.ok(),
        None => None,
    };
    next.call(req).await
}
