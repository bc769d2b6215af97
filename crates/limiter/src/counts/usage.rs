//! Granted and denied counts per policy, summed over every instance: each instance adds what
//! it decided (the server's acquire path tallies them), the console reads them back for its
//! tables and charts.
//!
//! Two fixed-size strings of big-endian u32 pairs (granted, denied) per policy, written with
//! `BITFIELD ... INCRBY` (saturating), so memory is bounded whatever the traffic:
//! - minutes: one string per hour, 60 pairs (480 bytes), kept 25 hours: the last hour and
//!   the last day at minute resolution;
//! - hours: one string per day, 24 pairs (192 bytes), kept 31 days: the last week (and
//!   month) at hour resolution.
//!
//! At most 25 x 480 + 31 x 192 bytes (~18 KB) per policy that had traffic, none for one
//! that had none. Keys carry the policy's hash tag: on a cluster they live beside it, and
//! one call may read a policy's state and counts together.

use crate::client::{KeySpace, Limiter, LimiterError};

/// How long a string of minutes is kept: a day back from any minute of its hour.
pub(crate) const KEEP_MINUTES_MS: i64 = 25 * 3600 * 1000;
/// How long a string of hours is kept: 30 days back from any hour of its day.
pub(crate) const KEEP_HOURS_MS: i64 = 31 * 24 * 3600 * 1000;
/// Bytes per (granted, denied) pair.
pub(crate) const PAIR_BYTES: usize = 8;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct MinuteCounts {
    /// Unix minute (ms / 60,000) at which the counted span starts.
    pub minute: i64,
    pub granted: u64,
    pub denied: u64,
    /// Granted by a shadow policy that would have denied them (not in `granted`).
    pub shadow_denied: u64,
    /// Refused with 503 because Redis could not be reached by a fail-closed policy (not
    /// in the others: no decision was taken). Only the tables read it.
    pub unavailable: u64,
    /// Of an application's counts only: acquires that named no policy (404).
    pub unknown_policy: u64,
    /// Of an application's counts only: acquires with a revoked or expired key (401).
    pub unauthenticated: u64,
}

/// The `i`th big-endian u32 of a usage string; zero past its end (nothing counted there).
pub(crate) fn u32_at(bytes: &[u8], i: usize) -> u64 {
    bytes.get(i * 4..i * 4 + 4).map_or(0, |b| {
        u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    })
}

/// The sum of every u32 of some strings of one u32 a minute.
fn sum_u32s(strings: &[Vec<u8>]) -> u64 {
    strings
        .iter()
        .flat_map(|bytes| (0..bytes.len() / 4).map(|i| u32_at(bytes, i)))
        .sum()
}

/// The (granted, denied) pairs of a usage string, in order; a string cut short (nothing
/// counted past its end) reads as zeros.
pub(crate) fn pairs(bytes: &[u8], count: usize) -> impl Iterator<Item = (u64, u64)> + '_ {
    (0..count).map(move |i| (u32_at(bytes, 2 * i), u32_at(bytes, 2 * i + 1)))
}

/// The minutes `first..=last` (at most an hour) as byte ranges of the previous hour's and
/// this hour's usage strings: GETRANGE's inclusive `(start, end)`, `(0, -1)` for none.
pub(crate) fn byte_ranges(first: i64, last: i64) -> [(i64, i64); 2] {
    let hour_start = last - last.rem_euclid(60);
    let pair = PAIR_BYTES as i64;
    let previous = if first < hour_start {
        (first.rem_euclid(60) * pair, 60 * pair - 1)
    } else {
        (0, -1)
    };
    let this = (
        first.max(hour_start).rem_euclid(60) * pair,
        last.rem_euclid(60) * pair + pair - 1,
    );
    [previous, this]
}

/// The span of a usage read: `points` points of `minutes_each` minutes, the last one
/// holding `now_minute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageSpan {
    pub points: i64,
    pub minutes_each: i64,
}

impl UsageSpan {
    pub const HOUR: Self = Self {
        points: 60,
        minutes_each: 1,
    };
    pub const DAY: Self = Self {
        points: 96,
        minutes_each: 15,
    };
    pub const WEEK: Self = Self {
        points: 168,
        minutes_each: 60,
    };

    /// The first minute of the first point.
    fn first_minute(self, now_minute: i64) -> i64 {
        let last_start = now_minute - now_minute.rem_euclid(self.minutes_each);
        last_start - (self.points - 1) * self.minutes_each
    }

    /// Whether the span reads hour strings (else minute strings).
    fn by_hour(self) -> bool {
        self.minutes_each % 60 == 0
    }

    /// The usage strings the span reads, oldest first, with the unix hour (or day) each
    /// starts at.
    pub(crate) fn strings(self, now_minute: i64) -> Vec<i64> {
        let first = self.first_minute(now_minute);
        let unit = if self.by_hour() { 24 * 60 } else { 60 };
        (first.div_euclid(unit)..=now_minute.div_euclid(unit)).collect()
    }

    /// The points of the span from its strings (as [`Self::strings`] names them, in order)
    /// and the shadow and refusal strings of the same hours or days (one u32 a slot;
    /// fewer or empty ones read as zeros).
    pub(crate) fn points_from(
        self,
        now_minute: i64,
        strings: &[Vec<u8>],
        shadow: &[Vec<u8>],
        unavailable: &[Vec<u8>],
    ) -> Vec<MinuteCounts> {
        let first = self.first_minute(now_minute);
        let (unit, per_string) = if self.by_hour() {
            (24 * 60, 24)
        } else {
            (60, 60)
        };
        let first_string = first.div_euclid(unit);
        // Each slot of a string: (its first minute, granted, denied).
        let slot_minutes = unit / per_string;
        let mut points: Vec<MinuteCounts> = (0..self.points)
            .map(|i| MinuteCounts {
                minute: first + i * self.minutes_each,
                ..MinuteCounts::default()
            })
            .collect();
        for (s, bytes) in strings.iter().enumerate() {
            let string_start = (first_string + s as i64) * unit;
            let shadow = shadow.get(s).map_or(&[][..], Vec::as_slice);
            let unavailable = unavailable.get(s).map_or(&[][..], Vec::as_slice);
            for (slot, (granted, denied)) in pairs(bytes, per_string as usize).enumerate() {
                let minute = string_start + slot as i64 * slot_minutes;
                let index = (minute - first).div_euclid(self.minutes_each);
                if let Some(p) = usize::try_from(index).ok().and_then(|i| points.get_mut(i)) {
                    p.granted += granted;
                    p.denied += denied;
                    p.shadow_denied += u32_at(shadow, slot);
                    p.unavailable += u32_at(unavailable, slot);
                }
            }
        }
        points
    }
}

/// `BITFIELD key OVERFLOW SAT INCRBY u32 #slot n0 INCRBY u32 #slot+1 n1 ...` (saturating
/// u32 counters from `slot` on), and the key's expiry, queued on `pipe`.
pub(crate) fn add_counts(
    pipe: &mut redis::Pipeline,
    key: &str,
    slot: i64,
    counts: &[u64],
    keep: i64,
) {
    let cmd = pipe.cmd("BITFIELD").arg(key).arg("OVERFLOW").arg("SAT");
    for (i, n) in (slot..).zip(counts) {
        cmd.arg("INCRBY").arg("u32").arg(format!("#{i}")).arg(*n);
    }
    cmd.ignore().pexpire(key, keep).ignore();
}

impl Limiter {
    /// Each application's acquires (of its own policies) over the `minutes` minutes (1 to
    /// 60) up to `now_minute`, summed (`minute` is the first one's): granted, denied,
    /// would-be denied by shadow policies (not in `granted`), and refused for want of
    /// Redis. One pipeline of up to six reads each (on a cluster, one per application, whose keys carry its own tag).
    #[tracing::instrument(level = "debug", skip_all, fields(apps = apps.len()))]
    pub async fn apps_recent_usage(
        &self,
        apps: &[&str],
        now_minute: i64,
        minutes: i64,
    ) -> Result<Vec<MinuteCounts>, LimiterError> {
        if apps.is_empty() {
            return Ok(Vec::new());
        }
        if self.conn.is_cluster() {
            let each = apps
                .iter()
                .map(|app| self.read_apps_usage(std::slice::from_ref(app), now_minute, minutes));
            let read: Result<Vec<Vec<MinuteCounts>>, LimiterError> =
                futures_util::future::join_all(each)
                    .await
                    .into_iter()
                    .collect();
            return Ok(read?.into_iter().flatten().collect());
        }
        self.read_apps_usage(apps, now_minute, minutes).await
    }

    async fn read_apps_usage(
        &self,
        apps: &[&str],
        now_minute: i64,
        minutes: i64,
    ) -> Result<Vec<MinuteCounts>, LimiterError> {
        let minutes = minutes.clamp(1, 60);
        let first = now_minute - minutes + 1;
        let hour = now_minute.div_euclid(60);
        // GETRANGE 0 -1 would be the whole string: a range that is none is not read.
        let reads: Vec<(i64, (i64, i64))> = [hour - 1, hour]
            .into_iter()
            .zip(byte_ranges(first, now_minute))
            .filter(|(_, (start, end))| end >= start)
            .collect();
        let mut pipe = redis::pipe();
        for app in apps {
            for (h, (start, end)) in &reads {
                pipe.cmd("GETRANGE")
                    .arg(self.keys.usage_app_minutes(app, *h))
                    .arg(start)
                    .arg(end);
            }
            // The shadow and refusal strings hold one u32 a minute: half a pair's bytes.
            for key_of in [
                KeySpace::usage_app_shadow_minutes,
                KeySpace::usage_app_unavailable_minutes,
                KeySpace::usage_app_unknown_minutes,
                KeySpace::usage_app_unauthenticated_minutes,
            ] {
                for (h, (start, end)) in &reads {
                    pipe.cmd("GETRANGE")
                        .arg(key_of(&self.keys, app, *h))
                        .arg(start / 2)
                        .arg((end + 1) / 2 - 1);
                }
            }
        }
        let mut conn = self.conn.clone();
        let replies: Vec<Vec<u8>> = self.timed(pipe.query_async(&mut conn)).await?;
        Ok(replies
            .chunks(5 * reads.len())
            .map(|strings| {
                let (pairs_read, rest) = strings.split_at(reads.len());
                let (shadow_read, rest) = rest.split_at(reads.len());
                let (unavailable_read, rest) = rest.split_at(reads.len());
                let (unknown_read, unauthenticated_read) = rest.split_at(reads.len());
                let (granted, denied) = pairs_read
                    .iter()
                    .flat_map(|bytes| pairs(bytes, bytes.len() / PAIR_BYTES))
                    .fold((0, 0), |(g, d), (pg, pd)| (g + pg, d + pd));
                let shadow_denied = sum_u32s(shadow_read);
                MinuteCounts {
                    minute: first,
                    // The would-be denials were granted, and counted so.
                    granted: granted.saturating_sub(shadow_denied),
                    denied,
                    shadow_denied,
                    unavailable: sum_u32s(unavailable_read),
                    unknown_policy: sum_u32s(unknown_read),
                    unauthenticated: sum_u32s(unauthenticated_read),
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_split_at_the_hour() {
        // 10:05, ten minutes back: 9:56..9:59 and 10:00..10:05.
        let last = 600 + 5;
        assert_eq!(byte_ranges(last - 9, last), [(56 * 8, 479), (0, 5 * 8 + 7)]);
        // 10:30: all in this hour.
        let last = 600 + 30;
        assert_eq!(byte_ranges(last - 9, last), [(0, -1), (21 * 8, 30 * 8 + 7)]);
    }

    fn string(pairs: &[(u32, u32)]) -> Vec<u8> {
        pairs
            .iter()
            .flat_map(|(g, d)| g.to_be_bytes().into_iter().chain(d.to_be_bytes()))
            .collect()
    }

    #[test]
    fn pairs_read_big_endian_and_zeros_past_the_end() {
        let bytes = string(&[(1, 2), (70_000, 0)]);
        let read: Vec<_> = pairs(&bytes, 3).collect();
        assert_eq!(read, vec![(1, 2), (70_000, 0), (0, 0)]);
    }

    #[test]
    fn an_hour_is_sixty_minutes_from_two_strings() {
        // 10:30 of some day: the hour back starts at 9:31.
        let now = 1_000 * 60 + 30;
        let span = UsageSpan::HOUR;
        assert_eq!(span.strings(now), vec![999, 1000]);
        let mut previous = vec![(0, 0); 60];
        previous[31] = (5, 1); // 9:31, the first point
        previous[30] = (100, 100); // 9:30, outside the span
        let mut this = vec![(0, 0); 60];
        this[30] = (7, 0); // 10:30, the last point
        let mut shadow = vec![0u8; 240];
        shadow[30 * 4..30 * 4 + 4].copy_from_slice(&9u32.to_be_bytes()); // 10:30
        let points = span.points_from(
            now,
            &[string(&previous), string(&this)],
            &[vec![], shadow],
            &[],
        );
        assert_eq!(points.len(), 60);
        assert_eq!(
            (points[0].minute, points[0].granted, points[0].denied),
            (now - 59, 5, 1)
        );
        assert_eq!(
            (
                points[59].minute,
                points[59].granted,
                points[59].shadow_denied
            ),
            (now, 7, 9)
        );
        let total: u64 = points.iter().map(|p| p.granted + p.denied).sum();
        assert_eq!(total, 13);
    }

    #[test]
    fn a_day_is_quarter_hours_and_a_week_hours() {
        let now = 20_000 * 60 + 7;
        let day = UsageSpan::DAY;
        assert_eq!(day.strings(now).len(), 25);
        let points = day.points_from(now, &vec![string(&[(1, 0); 60]); 25], &[], &[]);
        assert_eq!(points.len(), 96);
        // Each quarter hour sums its 15 minutes; the last one starts at 20000:00.
        assert!(points.iter().all(|p| p.granted == 15));
        assert_eq!(points[95].minute, now - 7);
        assert_eq!(points[0].minute, now - 7 - 95 * 15);
        let week = UsageSpan::WEEK;
        let strings = week.strings(now);
        assert_eq!(strings.len(), 8);
        let points = week.points_from(now, &vec![string(&[(0, 2); 24]); 8], &[], &[]);
        assert_eq!(points.len(), 168);
        assert!(points.iter().all(|p| p.denied == 2));
        assert_eq!(points[167].minute, now - 7);
    }
}
