//! How a policy or an application did over the last minutes, in one badge a list can be
//! read and sorted by: the share of acquires it denied (red from
//! [`SEVERE_SHARE`], amber below), or for shadow mode the share it would have denied
//! (amber), so that 1% and 58% denied no longer look alike and would-be denials are not
//! hidden behind "0 denied".

use std::fmt::Write;

use ratekeeper_limiter::MinuteCounts;

/// The denied share from which a badge is red.
pub const SEVERE_SHARE: f64 = 0.10;

/// Counts over the last minutes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recent {
    pub granted: u64,
    pub denied: u64,
    /// Granted by a shadow policy that would have denied them (not in `granted`).
    pub shadow_denied: u64,
    /// Refused (503) because Redis could not be reached (fail closed).
    pub unavailable: u64,
    /// An application's acquires that named no policy (404): clients calling a policy
    /// deleted or renamed, or never made. Not among the others' share.
    pub unknown_policy: u64,
    /// An application's acquires with a revoked or expired key of its own (401): a
    /// client not yet given the replacement. Not among the others' share.
    pub unauthenticated: u64,
}

/// A badge: its CSS class and its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Badge {
    /// `denying` (red), `denying-some` and `would-deny` (amber), `ok` or `idle`.
    pub class: &'static str,
    pub text: String,
}

impl Recent {
    pub fn of(minutes: &[MinuteCounts]) -> Self {
        minutes.iter().fold(Self::default(), |r, m| Self {
            granted: r.granted + m.granted,
            denied: r.denied + m.denied,
            shadow_denied: r.shadow_denied + m.shadow_denied,
            unavailable: r.unavailable + m.unavailable,
            unknown_policy: r.unknown_policy + m.unknown_policy,
            unauthenticated: r.unauthenticated + m.unauthenticated,
        })
    }

    pub fn total(&self) -> u64 {
        self.granted + self.denied + self.shadow_denied + self.unavailable
    }

    fn share(&self, part: u64) -> f64 {
        part as f64 / self.total().max(1) as f64
    }

    /// The badge: refusals for want of Redis first (a failure the limit did not choose),
    /// then denials, then would-be denials, then whether anything came.
    pub fn badge(&self) -> Badge {
        let (class, text) = if self.unavailable > 0 {
            (
                "denying",
                format!(
                    "Unavailable: {} refused",
                    percent(self.share(self.unavailable))
                ),
            )
        } else if self.denied > 0 {
            let share = self.share(self.denied);
            let class = if share >= SEVERE_SHARE {
                "denying"
            } else {
                "denying-some"
            };
            (class, format!("Denying {}", percent(share)))
        } else if self.shadow_denied > 0 {
            (
                "would-deny",
                format!("Would deny {}", percent(self.share(self.shadow_denied))),
            )
        } else if self.unauthenticated > 0 {
            (
                "denying-some",
                format!("{} with a revoked key", self.unauthenticated),
            )
        } else if self.unknown_policy > 0 {
            (
                "denying-some",
                format!("{} named no policy", self.unknown_policy),
            )
        } else if self.granted > 0 {
            ("ok", "No denials".to_owned())
        } else {
            ("idle", "No traffic".to_owned())
        };
        Badge { class, text }
    }

    /// The counts in a table's few words: "30 granted, 10 denied", "1 granted, 3 would deny"
    /// (the share is in the badge beside them; [`Self::words`] in full).
    pub fn counts(&self) -> String {
        let mut parts = vec![format!("{} granted", self.granted)];
        if self.denied > 0 || (self.shadow_denied == 0 && self.unavailable == 0) {
            parts.push(format!("{} denied", self.denied));
        }
        if self.shadow_denied > 0 {
            parts.push(format!("{} would deny", self.shadow_denied));
        }
        if self.unavailable > 0 {
            parts.push(format!("{} refused (503)", self.unavailable));
        }
        parts.join(", ")
    }

    /// The counts in words: "30 granted, 10 denied (25%)", with the would-be denials when
    /// there are some.
    pub fn words(&self) -> String {
        let mut words = String::new();
        self.write_words(&mut words);
        words
    }

    /// [`Self::words`] written onto `out` (a chart writes one per bar).
    pub fn write_words(&self, out: &mut String) {
        let _ = write!(out, "{} granted, {} denied", self.granted, self.denied);
        if self.denied > 0 {
            let _ = write!(out, " ({})", percent(self.share(self.denied)));
        }
        if self.shadow_denied > 0 {
            let _ = write!(out, ", {} would have been denied", self.shadow_denied);
        }
        if self.unavailable > 0 {
            let _ = write!(
                out,
                ", {} refused with 503: Redis unreachable",
                self.unavailable
            );
        }
        if self.unauthenticated > 0 {
            let _ = write!(
                out,
                ", {} refused with a revoked or expired key (401)",
                self.unauthenticated
            );
        }
        if self.unknown_policy > 0 {
            let _ = write!(out, ", {} named no policy (404)", self.unknown_policy);
        }
    }

    /// How much attention it needs, highest first: the share refused for want of Redis,
    /// the denied share, then the would-be denied share (in parts per million, so that
    /// they order exactly).
    pub fn attention(&self) -> (u64, u64, u64) {
        let ppm = |part| (self.share(part) * 1e6) as u64;
        (
            ppm(self.unavailable),
            ppm(self.denied),
            ppm(self.shadow_denied),
        )
    }

    pub fn is_refusing(&self) -> bool {
        self.unavailable > 0
    }

    pub fn is_denying(&self) -> bool {
        self.denied > 0
    }

    pub fn would_deny(&self) -> bool {
        self.shadow_denied > 0
    }

    pub fn is_idle(&self) -> bool {
        self.total() == 0
    }
}

/// A share as a percentage a person reads: "<1%" for a small one that is not none.
fn percent(share: f64) -> String {
    if share > 0.0 && share < 0.01 {
        "<1%".to_owned()
    } else {
        format!("{:.0}%", share * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recent(granted: u64, denied: u64, shadow_denied: u64) -> Recent {
        Recent {
            granted,
            denied,
            shadow_denied,
            unavailable: 0,
            unknown_policy: 0,
            unauthenticated: 0,
        }
    }

    #[test]
    fn a_badge_tells_how_much_is_denied() {
        let badge = |r: Recent| {
            let b = r.badge();
            (b.class, b.text)
        };
        assert_eq!(
            badge(recent(99, 1, 0)),
            ("denying-some", "Denying 1%".into())
        );
        assert_eq!(
            badge(recent(999, 1, 0)),
            ("denying-some", "Denying <1%".into())
        );
        assert_eq!(badge(recent(42, 58, 0)), ("denying", "Denying 58%".into()));
        assert_eq!(
            badge(recent(2272, 0, 1303)),
            ("would-deny", "Would deny 36%".into())
        );
        assert_eq!(badge(recent(5, 0, 0)), ("ok", "No denials".into()));
        assert_eq!(badge(recent(0, 0, 0)), ("idle", "No traffic".into()));
    }

    #[test]
    fn refusals_for_want_of_redis_come_first() {
        let r = Recent {
            unavailable: 30,
            ..recent(60, 10, 0)
        };
        assert_eq!(
            (r.badge().class, r.badge().text),
            ("denying", "Unavailable: 30% refused".into())
        );
        assert_eq!(
            r.words(),
            "60 granted, 10 denied (10%), 30 refused with 503: Redis unreachable"
        );
        assert!(r.attention() > recent(1, 99, 0).attention());
    }

    #[test]
    fn words_name_would_be_denials() {
        assert_eq!(
            recent(2272, 0, 1303).words(),
            "2272 granted, 0 denied, 1303 would have been denied",
        );
        assert_eq!(
            recent(2272, 0, 1303).counts(),
            "2272 granted, 1303 would deny",
            "a shadow policy denies no one: its zero is left out"
        );
        assert_eq!(recent(30, 10, 0).words(), "30 granted, 10 denied (25%)");
    }

    #[test]
    fn attention_ranks_denials_before_would_be_denials() {
        assert!(recent(42, 58, 0).attention() > recent(99, 1, 0).attention());
        assert!(recent(99, 1, 0).attention() > recent(0, 0, 100).attention());
        assert!(recent(0, 0, 100).attention() > recent(100, 0, 0).attention());
    }
}
