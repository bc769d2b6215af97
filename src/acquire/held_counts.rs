//! Which of the counts a flush took it writes now, and which wait for a later flush.
//!
//! Redis' work in a flush grows with the policies it carries, not with their decisions:
//! each policy's minute, hour and top callers are keys of their own. Over thousands of
//! policies with a few decisions each, that work rivals the decisions' own. So when one
//! flush carries [`HOLD_FROM_POLICIES`] policies or more, a quiet policy (fewer than
//! [`BUSY_DECISIONS`] decisions since its last write, none denied or refused) waits, for
//! [`HOLD_FLUSHES`] flushes at most, and its counts are then written in one go. A busy or
//! denying policy is written at every flush, as every policy is while flushes carry fewer.
//! Nothing waits past the minute it was counted in (it is then written to that minute),
//! past the flush before a stop, or beyond [`HELD_MOST`] policies.

use std::collections::HashMap;

use super::Taken;

/// From this many policies in one flush, quiet policies wait.
pub const HOLD_FROM_POLICIES: usize = 1_000;

/// Decisions since its last write from which a policy is written at once.
pub const BUSY_DECISIONS: u64 = 64;

/// The most flushes a quiet policy's counts span: taken by one, written by the fifth at the
/// latest (so within 10 s of its first decision counted, at one flush every 2 s).
pub const HOLD_FLUSHES: u64 = 5;

/// The most policies held: beyond, they are written at once, so that the memory held stays
/// within one worker's table (`tally::MAX_TALLIED_POLICIES`).
pub const HELD_MOST: usize = 14_336;

/// The counts waiting, all of one minute.
#[derive(Debug, Default)]
pub struct HeldCounts {
    /// The minute of the flushes that took the held counts.
    minute: i64,
    /// Flushes so far.
    flushes: u64,
    held: HashMap<String, Held>,
}

#[derive(Debug)]
struct Held {
    taken: Taken,
    /// The flush that first held these counts.
    since: u64,
}

/// What one flush writes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Due {
    /// Counts held in a minute that has ended since, with that minute.
    pub ended: Option<(i64, Vec<Taken>)>,
    /// Counts of the flush's own minute.
    pub now: Vec<Taken>,
}

impl HeldCounts {
    /// What a flush in `minute` that took `taken` writes; what it does not write is held.
    /// `last`: the flush before a stop, which writes everything.
    pub fn due(&mut self, minute: i64, taken: Vec<Taken>, last: bool) -> Due {
        self.flushes += 1;
        let mut due = Due::default();
        if minute != self.minute && !self.held.is_empty() {
            let ended = self.held.drain().map(|(_, h)| h.taken).collect();
            due.ended = Some((self.minute, ended));
        }
        self.minute = minute;
        let holding = !last && taken.len() >= HOLD_FROM_POLICIES;
        for mut t in taken {
            let since = match self.held.remove(&t.policy) {
                Some(held) => {
                    add(&mut t, held.taken);
                    held.since
                }
                None => self.flushes,
            };
            if holding && self.may_wait(&t, since) {
                self.held.insert(t.policy.clone(), Held { taken: t, since });
            } else {
                due.now.push(t);
            }
        }
        // The held policies this flush took nothing of: written once they waited their
        // longest, or as soon as flushes carry few policies.
        let flushes = self.flushes;
        due.now.extend(
            self.held
                .extract_if(|_, h| !holding || flushes - h.since + 1 >= HOLD_FLUSHES)
                .map(|(_, h)| h.taken),
        );
        due
    }

    /// How many policies' counts wait.
    pub fn policies(&self) -> usize {
        self.held.len()
    }

    fn may_wait(&self, t: &Taken, since: u64) -> bool {
        let c = &t.counts;
        c.denied == 0
            && c.shadow_denied == 0
            && c.unavailable == 0
            && c.granted < BUSY_DECISIONS
            && self.flushes - since + 1 < HOLD_FLUSHES
            && self.held.len() < HELD_MOST
    }
}

/// `earlier`'s counts and callers added into `into`, both of one policy.
fn add(into: &mut Taken, earlier: Taken) {
    into.counts.merge(earlier.counts);
    add_callers(&mut into.granted, earlier.granted);
    add_callers(&mut into.denied, earlier.denied);
    add_callers(&mut into.shadow_denied, earlier.shadow_denied);
}

fn add_callers(into: &mut Vec<(String, u64)>, earlier: Vec<(String, u64)>) {
    for (caller, n) in earlier {
        match into.iter_mut().find(|(c, _)| *c == caller) {
            Some((_, count)) => *count += n,
            None => into.push((caller, n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(policy: &str, n: u64) -> Taken {
        let mut t = Taken {
            policy: policy.into(),
            ..Taken::default()
        };
        t.counts.granted = n;
        t.granted = vec![("app".into(), n)];
        t
    }

    /// `quiet` policies with `n` grants each, named q0.., and the ones given.
    fn flush(quiet: usize, n: u64, also: Vec<Taken>) -> Vec<Taken> {
        let mut taken: Vec<Taken> = (0..quiet).map(|i| granted(&format!("q{i}"), n)).collect();
        taken.extend(also);
        taken
    }

    fn named<'a>(counts: &'a [Taken], policy: &str) -> Option<&'a Taken> {
        counts.iter().find(|t| t.policy == policy)
    }

    fn total(counts: &[Taken]) -> u64 {
        counts.iter().map(|t| t.counts.granted).sum()
    }

    #[test]
    fn few_policies_are_written_at_every_flush() {
        let mut held = HeldCounts::default();
        let due = held.due(1, flush(HOLD_FROM_POLICIES - 1, 1, vec![]), false);
        assert_eq!(due.now.len(), HOLD_FROM_POLICIES - 1);
        assert_eq!(due.ended, None);
    }

    #[test]
    fn among_many_policies_quiet_ones_wait_and_busy_or_refusing_ones_do_not() {
        let mut held = HeldCounts::default();
        let mut denying = granted("denying", 1);
        denying.counts.denied = 1;
        let mut shadow = granted("shadow", 1);
        shadow.counts.shadow_denied = 1;
        let mut refused = granted("refused", 0);
        refused.counts.unavailable = 1;
        let also = vec![granted("busy", BUSY_DECISIONS), denying, shadow, refused];
        let due = held.due(1, flush(HOLD_FROM_POLICIES, 1, also), false);
        let mut now: Vec<&str> = due.now.iter().map(|t| t.policy.as_str()).collect();
        now.sort_unstable();
        assert_eq!(now, ["busy", "denying", "refused", "shadow"]);
    }

    #[test]
    fn a_quiet_policy_is_written_after_its_longest_wait_with_every_count_and_caller() {
        let mut held = HeldCounts::default();
        for i in 1..HOLD_FLUSHES {
            let due = held.due(1, flush(HOLD_FROM_POLICIES, 2, vec![]), false);
            assert!(due.now.is_empty(), "flush {i} writes nothing");
        }
        let due = held.due(1, flush(HOLD_FROM_POLICIES, 2, vec![]), false);
        assert_eq!(due.now.len(), HOLD_FROM_POLICIES);
        let q0 = named(&due.now, "q0").unwrap();
        assert_eq!(q0.counts.granted, 2 * HOLD_FLUSHES);
        assert_eq!(q0.granted, vec![("app".to_string(), 2 * HOLD_FLUSHES)]);
    }

    #[test]
    fn a_quiet_policy_that_became_busy_is_written_with_what_it_waited_with() {
        let mut held = HeldCounts::default();
        held.due(1, flush(HOLD_FROM_POLICIES, 1, vec![]), false);
        let due = held.due(
            1,
            flush(HOLD_FROM_POLICIES, BUSY_DECISIONS - 1, vec![]),
            false,
        );
        assert_eq!(due.now.len(), HOLD_FROM_POLICIES);
        assert_eq!(total(&due.now), HOLD_FROM_POLICIES as u64 * BUSY_DECISIONS);
    }

    #[test]
    fn a_held_policy_not_decided_since_is_written_after_its_longest_wait() {
        let mut held = HeldCounts::default();
        held.due(
            1,
            flush(HOLD_FROM_POLICIES, 1, vec![granted("once", 1)]),
            false,
        );
        for _ in 2..HOLD_FLUSHES {
            let due = held.due(1, flush(HOLD_FROM_POLICIES, 1, vec![]), false);
            assert!(named(&due.now, "once").is_none());
        }
        let due = held.due(1, flush(HOLD_FROM_POLICIES, 1, vec![]), false);
        assert_eq!(named(&due.now, "once").unwrap().counts.granted, 1);
    }

    #[test]
    fn held_counts_go_to_their_own_minute_once_it_ended() {
        let mut held = HeldCounts::default();
        held.due(7, flush(HOLD_FROM_POLICIES, 1, vec![]), false);
        let due = held.due(8, flush(HOLD_FROM_POLICIES, 3, vec![]), false);
        let (minute, ended) = due.ended.expect("the held counts of minute 7");
        assert_eq!(minute, 7);
        assert_eq!(total(&ended), HOLD_FROM_POLICIES as u64);
        assert!(due.now.is_empty(), "minute 8's own counts wait in turn");
    }

    #[test]
    fn everything_held_is_written_when_flushes_carry_few_policies_or_before_a_stop() {
        let mut held = HeldCounts::default();
        held.due(1, flush(HOLD_FROM_POLICIES, 1, vec![]), false);
        let due = held.due(1, flush(1, 1, vec![]), false);
        assert_eq!(total(&due.now), HOLD_FROM_POLICIES as u64 + 1);

        held.due(1, flush(HOLD_FROM_POLICIES, 1, vec![]), false);
        let due = held.due(1, flush(HOLD_FROM_POLICIES, 1, vec![]), true);
        assert_eq!(total(&due.now), 2 * HOLD_FROM_POLICIES as u64);
        assert!(held.held.is_empty());
    }

    #[test]
    fn no_more_than_the_most_policies_are_held() {
        let mut held = HeldCounts::default();
        let due = held.due(1, flush(HELD_MOST + 10, 1, vec![]), false);
        assert_eq!(held.held.len(), HELD_MOST);
        assert_eq!(due.now.len(), 10);
    }
}
