//! The keyed scenarios walk their keys (bench/acquire_keyed.lua): each wrk thread its own
//! share, in order, from where it stopped in the round before. So the distinct keys the
//! server has seen are counted, not guessed: each thread's keys handed out in all rounds,
//! at most its share, added up.

use crate::wrk::Walk;

/// One keyed scenario's walk over the rounds.
#[derive(Debug, Default, Clone)]
pub struct Walks {
    threads: usize,
    /// Per thread: the next position, the keys handed out so far, the size of its share.
    next: Vec<u64>,
    done: Vec<u64>,
    share: Vec<u64>,
    /// Per round: the keys handed out in it (`None` if its walk lines were missing).
    pub walked: Vec<Option<u64>>,
    /// A round reported fewer walks than threads: the keys seen are unknown.
    lost: bool,
}

impl Walks {
    pub fn new(threads: usize) -> Self {
        Self {
            threads,
            next: vec![0; threads],
            done: vec![0; threads],
            share: vec![0; threads],
            ..Self::default()
        }
    }

    /// Each thread's start position, as the script's argument: `0,0` at first.
    pub fn starts(&self) -> String {
        self.next
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Notes a round's walk lines; `false` when some thread's line was missing.
    pub fn note(&mut self, walks: &[Walk]) -> bool {
        let mut walked = 0;
        let mut seen = 0;
        for w in walks.iter().filter(|w| w.thread < self.threads) {
            self.next[w.thread] = w.next;
            self.share[w.thread] = w.share;
            self.done[w.thread] += w.walked;
            walked += w.walked;
            seen += 1;
        }
        let complete = seen == self.threads;
        self.lost |= !complete;
        self.walked.push(complete.then_some(walked));
        complete
    }

    /// The distinct keys handed out in all rounds.
    pub fn seen(&self) -> Option<u64> {
        (!self.lost).then(|| {
            self.done
                .iter()
                .zip(&self.share)
                .map(|(d, s)| *d.min(s))
                .sum()
        })
    }

    /// The keys handed out in all rounds, repeats included.
    pub fn handed_out(&self) -> Option<u64> {
        (!self.lost).then(|| self.done.iter().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_seen_are_each_threads_share_at_most() {
        let mut walks = Walks::new(2);
        assert_eq!(walks.starts(), "0,0");
        let round = |walked: u64, next: u64| {
            [0, 1].map(|thread| Walk {
                thread,
                share: 50,
                walked,
                next,
            })
        };
        assert!(walks.note(&round(30, 30)));
        assert_eq!(walks.starts(), "30,30");
        assert_eq!(walks.seen(), Some(60));
        assert!(walks.note(&round(40, 20)));
        assert_eq!(walks.seen(), Some(100));
        assert_eq!(walks.handed_out(), Some(140));
        assert!(!walks.note(&round(1, 1)[..1]));
        assert_eq!(walks.seen(), None);
        assert_eq!(walks.walked, vec![Some(60), Some(80), None]);
    }
}
