//! Single requests to the acquire path: the probes that wait until a scenario's acquire is
//! granted (a new API key may reach the server's key snapshot a little later), and the
//! sample replies of the report.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::admin_api::{Reply, head};
use crate::procs::Service;

/// One `POST <base><path>` of an acquire body, with the API key if any.
pub async fn acquire_once(
    base: &str,
    path: &str,
    api_key: Option<&str>,
    resource: &str,
    caller: Option<&str>,
) -> Reply {
    let key = caller
        .map(|c| format!(r#","key":"{c}""#))
        .unwrap_or_default();
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("Content-Type", "application/json")
        .body(format!(r#"{{"resource":"{resource}","permits":1{key}}}"#))
        .timeout(Duration::from_secs(5));
    if let Some(api_key) = api_key {
        request = request.bearer_auth(api_key);
    }
    match request.send().await {
        Ok(reply) => Reply {
            status: reply.status().as_u16(),
            body: head(&reply.text().await.unwrap_or_default(), 400).to_owned(),
        },
        Err(e) => Reply {
            status: 0,
            body: e.to_string(),
        },
    }
}

/// Waits (at most 30 s) until the acquire answers 200; its reply.
pub async fn wait_granted(
    base: &str,
    path: &str,
    api_key: Option<&str>,
    resource: &str,
    caller: Option<&str>,
    serving: &mut Service,
) -> Result<Reply> {
    let started = Instant::now();
    loop {
        let reply = acquire_once(base, path, api_key, resource, caller).await;
        if reply.status == 200 {
            return Ok(reply);
        }
        serving.check_alive("while probed")?;
        if started.elapsed() > Duration::from_secs(30) {
            bail!(
                "POST {path} {{\"resource\":\"{resource}\"}} still answers {:03} after 30 s: {}",
                reply.status,
                head(&reply.body, 600)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
