//! How the acquires waiting together go to Redis: as entries (an acquire, and how many
//! identical acquires right behind it on the same bucket it stands for), grouped into
//! calls (one on a single node; one per hash slot on a cluster, where one script may only
//! touch the keys of one slot), and where each acquire's reply comes back.
//!
//! Arrival order on each bucket is kept: an acquire joins the entry of an earlier one only
//! when that entry is the last one on its bucket so far, so the script decides the
//! acquires of a bucket in the order they came. Acquires of different buckets never
//! depend on each other (one clock reading per call), so their order between buckets does
//! not matter.

use std::collections::HashMap;

/// One entry of a call: the acquire that stands for it (its index among the waiting
/// ones), and how many acquires it stands for (itself and the identical ones after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub first: usize,
    pub count: usize,
}

/// The calls of a batch, and where each acquire's reply is.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Per call, its entries in order.
    pub calls: Vec<Vec<Entry>>,
    /// Per acquire, in arrival order: its call, and the index of its reply among that
    /// call's replies (the entries' replies follow each other, `count` each).
    pub replies: Vec<(usize, usize)>,
}

impl Plan {
    /// The plan for `n` acquires: `key(i)` is the key acquire `i` decides on, `group(i)`
    /// the call it must go in (its slot on a cluster, 0 on a single node), and
    /// `repeats(i, j)` whether acquire `j` asks for exactly what an earlier `i` asks.
    pub fn of<'k, G: Copy + Eq + std::hash::Hash>(
        n: usize,
        key: impl Fn(usize) -> &'k str,
        group: impl Fn(usize) -> G,
        repeats: impl Fn(usize, usize) -> bool,
    ) -> Self {
        let mut calls: Vec<Vec<Entry>> = Vec::new();
        let mut call_of: HashMap<G, usize> = HashMap::new();
        // The last entry on each bucket so far: (call, entry).
        let mut last_on: HashMap<&'k str, (usize, usize)> = HashMap::with_capacity(n);
        // Per acquire: (call, entry, rank within the entry).
        let mut placed: Vec<(usize, usize, usize)> = Vec::with_capacity(n);
        for i in 0..n {
            let bucket = key(i);
            if let Some(&(call, entry)) = last_on.get(bucket) {
                let e = &mut calls[call][entry];
                if repeats(e.first, i) {
                    placed.push((call, entry, e.count));
                    e.count += 1;
                    continue;
                }
            }
            let call = *call_of.entry(group(i)).or_insert_with(|| {
                calls.push(Vec::new());
                calls.len() - 1
            });
            let entry = calls[call].len();
            calls[call].push(Entry { first: i, count: 1 });
            last_on.insert(bucket, (call, entry));
            placed.push((call, entry, 0));
        }
        // Where each entry's replies start within its call.
        let starts: Vec<Vec<usize>> = calls
            .iter()
            .map(|entries| {
                entries
                    .iter()
                    .scan(0, |next, e| {
                        let start = *next;
                        *next += e.count;
                        Some(start)
                    })
                    .collect()
            })
            .collect();
        let replies = placed
            .into_iter()
            .map(|(call, entry, rank)| (call, starts[call][entry] + rank))
            .collect();
        Self { calls, replies }
    }

    /// How many replies call `call` brings back (one per acquire it decides).
    pub fn replies_of(&self, call: usize) -> usize {
        self.calls[call].iter().map(|e| e.count).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Acquires as (bucket, what they ask for); "same ask" repeats, and every bucket's
    /// group is its first letter.
    fn plan(acquires: &[(&'static str, u32)]) -> Plan {
        Plan::of(
            acquires.len(),
            |i| acquires[i].0,
            |i| acquires[i].0.as_bytes()[0],
            |i, j| acquires[i] == acquires[j],
        )
    }

    #[test]
    fn identical_acquires_of_one_bucket_go_as_one_entry() {
        let p = plan(&[("a1", 1), ("a1", 1), ("a2", 1), ("a1", 1)]);
        assert_eq!(
            p.calls,
            vec![vec![
                Entry { first: 0, count: 3 },
                Entry { first: 2, count: 1 }
            ]]
        );
        // The third acquire of a1 is a1's entry's third reply; a2's comes after them.
        assert_eq!(p.replies, vec![(0, 0), (0, 1), (0, 3), (0, 2)]);
        assert_eq!(p.replies_of(0), 4);
    }

    #[test]
    fn another_ask_on_the_bucket_keeps_the_order_of_its_bucket() {
        // 1, 1, then 5, then 1: the last one may not join the first entry, or it would be
        // decided before the 5 that came ahead of it.
        let p = plan(&[("a1", 1), ("a1", 1), ("a1", 5), ("a1", 1), ("a1", 1)]);
        assert_eq!(
            p.calls,
            vec![vec![
                Entry { first: 0, count: 2 },
                Entry { first: 2, count: 1 },
                Entry { first: 3, count: 2 }
            ]]
        );
        assert_eq!(p.replies, vec![(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]);
    }

    #[test]
    fn each_group_is_a_call_of_its_own() {
        let p = plan(&[("a1", 1), ("b1", 1), ("a2", 1), ("b1", 1), ("c1", 2)]);
        assert_eq!(p.calls.len(), 3);
        assert_eq!(
            p.calls[1],
            vec![Entry { first: 1, count: 2 }],
            "b1 twice, in b's call"
        );
        assert_eq!(p.replies, vec![(0, 0), (1, 0), (0, 1), (1, 1), (2, 0)]);
        assert_eq!(
            (p.replies_of(0), p.replies_of(1), p.replies_of(2)),
            (2, 2, 1)
        );
    }

    #[test]
    fn acquires_that_never_repeat_each_have_an_entry() {
        let acquires = [("a1", 1), ("a1", 1), ("a1", 1)];
        let p = Plan::of(3, |i| acquires[i].0, |_| 0, |_, _| false);
        assert_eq!(p.calls[0].len(), 3);
        assert_eq!(p.replies, vec![(0, 0), (0, 1), (0, 2)]);
    }
}
