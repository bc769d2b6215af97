//! Test helpers: a fresh database per test on each SQL backend, a Redis key prefix per
//! test, the real server on port 0, and calls that read like the user story.
//!
//! - `services`: the databases, the Redis URL and a private Redis server;
//! - `app`: the server on port 0 (`spawn_app`, `TestApp`) and its JSON API calls;
//! - `html`: a console page (`Page`) and the forms on it, read as a browser reads them;
//! - `browser`: a browser on the console (`Browser`), signing in and posting forms;
//! - `processes`: servers of the test's own to take down (Redis, a cluster, a TCP proxy).

mod app;
mod browser;
mod html;
mod processes;
mod services;

pub use app::*;
pub use browser::*;
pub use html::*;
pub use processes::*;
pub use services::*;

use std::time::{Duration, Instant};

/// Polls `check` until it holds, for at most `limit`: waiting for an outcome that
/// another task brings about (a reconcile pass), never for a fixed time.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    false
}

/// Runs one test body against every SQL backend, as separate tests.
#[macro_export]
macro_rules! on_every_backend {
    ($name:ident, $body:path) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $body($crate::helpers::Db::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $body($crate::helpers::Db::Postgres).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                $body($crate::helpers::Db::MySql).await
            }
        }
    };
}
