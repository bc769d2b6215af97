//! [`Lease`]: a `concurrency` permit held for a scope.

use crate::client::Client;
use crate::decision::{Decision, Released};
use crate::error::Error;

/// A granted `concurrency` permit (from [`Client::lease`]). Give it back with
/// [`Lease::release`] when the work is done.
///
/// Dropped without a release, it spawns a best-effort release on the current tokio
/// runtime, if there is one (its outcome is not reported; with no runtime, nothing is
/// sent). Either way the server lets a lease never released expire after the policy's
/// `lease_ttl_ms`, so a crashed process cannot hold a permit for ever.
#[derive(Debug)]
pub struct Lease {
    client: Client,
    resource: String,
    key: Option<String>,
    decision: Decision,
    released: bool,
}

impl Lease {
    pub(crate) fn new(
        client: Client,
        resource: String,
        key: Option<String>,
        decision: Decision,
    ) -> Self {
        Self {
            client,
            resource,
            key,
            decision,
            released: false,
        }
    }

    /// The decision that granted it.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// The lease's id; `None` for a degraded (fail-open) grant, which holds nothing.
    pub fn id(&self) -> Option<&str> {
        self.decision.lease_id.as_deref()
    }

    /// Gives the permit back now. `Ok(None)` for a lease without an id (a degraded
    /// grant): nothing is sent.
    pub async fn release(mut self) -> Result<Option<Released>, Error> {
        self.released = true;
        let Some(id) = self.decision.lease_id.as_deref() else {
            return Ok(None);
        };
        self.client
            .release(&self.resource, id, self.key.as_deref())
            .await
            .map(Some)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let Some(id) = self.decision.lease_id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        let resource = std::mem::take(&mut self.resource);
        let key = self.key.take();
        runtime.spawn(async move {
            let _ = client.release(&resource, &id, key.as_deref()).await;
        });
    }
}
