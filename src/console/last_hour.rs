//! What a policy decided over the last hour, in words: said before a change that would
//! cut its clients off (deleting it, or a policy file's plan that deletes it).

use ratekeeper_limiter::MinuteCounts;

use super::recent::Recent;

/// The acquires a policy decided over the last hour: the same sums as a table's recent
/// counts, said for a delete.
pub struct LastHour(Recent);

impl LastHour {
    pub fn of(minutes: &[MinuteCounts]) -> Self {
        Self(Recent::of(minutes))
    }

    pub fn total(&self) -> u64 {
        self.0.total()
    }

    /// "1,204 granted, 31 denied" and the rarer outcomes when there were any.
    pub fn parts(&self) -> String {
        let r = &self.0;
        let mut parts = vec![
            format!("{} granted", r.granted),
            format!("{} denied", r.denied),
        ];
        if r.shadow_denied > 0 {
            parts.push(format!("{} would have been denied", r.shadow_denied));
        }
        if r.unavailable > 0 {
            parts.push(format!("{} refused with 503", r.unavailable));
        }
        parts.join(", ")
    }
}
