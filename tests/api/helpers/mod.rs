//! Test helpers: a fresh database per test on each SQL backend, a Redis key prefix per
//! test, the real server on port 0, and calls that read like the user story.
//!
//! - `services`: the databases, the Redis URL and a private Redis server;
//! - `app`: the server on port 0 (`spawn_app`, `TestApp`) and its JSON API calls;
//! - `html`: a console page (`Page`) and the forms on it, read as a browser reads them;
//! - `browser`: a browser on the console (`Browser`), signing in and posting forms;
//! - `processes`: servers of the test's own to take down (Redis, a cluster, a TCP proxy);
//! - `tls_proxy`: a CA of the test's own and TLS terminated in front of the server;
//! - `pausing_proxy`: an HTTP proxy that holds a request back until the test lets it go;
//! - `oidc_provider`: an OpenID Provider whose tokens the test chooses;
//! - `receiver`: a webhook receiver that keeps what it gets and fails when told to.

mod app;
mod browser;
mod html;
mod oidc_provider;
mod pausing_proxy;
mod processes;
mod receiver;
mod services;
mod tls_proxy;

pub use app::*;
pub use browser::*;
pub use html::*;
pub use oidc_provider::*;
pub use pausing_proxy::*;
pub use processes::*;
pub use receiver::*;
pub use services::*;
pub use tls_proxy::*;

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

/// Runs one test body against each listed SQL backend, as separate tests named after
/// them: `backend_tests!(name, body, sqlite: Sqlite, postgres: Postgres)`.
#[macro_export]
macro_rules! backend_tests {
    ($name:ident, $body:path, $($test:ident: $db:ident),+) => {
        mod $name {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    $body($crate::helpers::Db::$db).await
                }
            )+
        }
    };
}

/// Runs one test body against every SQL backend, as separate tests.
#[macro_export]
macro_rules! on_every_backend {
    ($name:ident, $body:path) => {
        $crate::backend_tests!($name, $body, sqlite: Sqlite, postgres: Postgres, mysql: MySql);
    };
}

/// Runs one test body against the backends that lock rows (PostgreSQL and MariaDB), as
/// separate tests: for what only row locks bring about, such as a deadlock, which SQLite's
/// one writer at a time cannot.
#[macro_export]
macro_rules! on_row_locking_backends {
    ($name:ident, $body:path) => {
        $crate::backend_tests!($name, $body, postgres: Postgres, mysql: MySql);
    };
}
