//! What every HTTP handler may use, the APIs' and the console's alike: built once at
//! start (see `startup`) and shared by all workers.

use std::sync::Arc;

use crate::acquire::{DecisionCounts, DenialCache};
use crate::control::Control;
use crate::limiter::Limiter;
use crate::snapshot::Snapshot;
use crate::store::Store;

pub struct AppState {
    pub control: Control,
    pub limiter: Limiter,
    pub snapshot: Arc<Snapshot>,
    pub denials: Arc<DenialCache>,
    /// Granted/denied counts for the console's activity chart.
    pub decisions: Arc<DecisionCounts>,
    pub store: Store,
}
