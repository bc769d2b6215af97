//! What a policy decided over the last hour, in words: said before a change that would
//! cut its clients off (deleting it, or a policy file's plan that deletes it).

use ratekeeper_limiter::MinuteCounts;

/// The acquires a policy decided over the last hour.
pub struct LastHour {
    pub granted: u64,
    pub denied: u64,
    pub would_deny: u64,
    pub refused: u64,
}

impl LastHour {
    pub fn of(minutes: &[MinuteCounts]) -> Self {
        minutes.iter().fold(
            Self {
                granted: 0,
                denied: 0,
                would_deny: 0,
                refused: 0,
            },
            |sum, m| Self {
                granted: sum.granted + m.granted,
                denied: sum.denied + m.denied,
                would_deny: sum.would_deny + m.shadow_denied,
                refused: sum.refused + m.unavailable,
            },
        )
    }

    pub fn total(&self) -> u64 {
        self.granted + self.denied + self.would_deny + self.refused
    }

    /// "1,204 granted, 31 denied" and the rarer outcomes when there were any.
    pub fn parts(&self) -> String {
        let mut parts = vec![
            format!("{} granted", self.granted),
            format!("{} denied", self.denied),
        ];
        if self.would_deny > 0 {
            parts.push(format!("{} would have been denied", self.would_deny));
        }
        if self.refused > 0 {
            parts.push(format!("{} refused with 503", self.refused));
        }
        parts.join(", ")
    }
}
