//! `lua/policies_live.lua`, through `Limiter::live_views`: the minutes asked are read from
//! this hour's strings, and from the previous hour's only when they begin in it.

use std::time::Duration;

use ratekeeper_limiter::domain::PolicyName;
use ratekeeper_limiter::{Limiter, MinuteCounts, PolicyFlush, StateRead, TopBatch};

use crate::helpers::{redis_url, test_prefix};

/// A Unix minute that begins an hour.
const HOUR_START: i64 = 28_999_980;

fn counts(granted: u64, denied: u64, shadow_denied: u64, unavailable: u64) -> PolicyFlush<'static> {
    PolicyFlush {
        granted,
        denied,
        shadow_denied,
        unavailable,
        top: TopBatch {
            policy: "p",
            granted: &[],
            denied: &[],
            shadow_denied: &[],
        },
    }
}

/// (granted, denied, shadow_denied, unavailable) of each minute read, oldest first.
fn read(minutes: &[MinuteCounts]) -> Vec<(i64, [u64; 4])> {
    minutes
        .iter()
        .map(|m| {
            (
                m.minute - HOUR_START,
                [m.granted, m.denied, m.shadow_denied, m.unavailable],
            )
        })
        .collect()
}

#[tokio::test]
async fn the_live_view_reads_the_minutes_asked_across_an_hours_end() {
    let prefix = test_prefix("live-hours");
    let limiter = Limiter::new(&redis_url(), &prefix, Duration::from_secs(5)).unwrap();
    // Minute 58 of the previous hour, and minute 2 of this one.
    for (minute, flush) in [
        (HOUR_START - 2, counts(3, 1, 2, 4)),
        (HOUR_START + 2, counts(5, 0, 1, 0)),
    ] {
        limiter.add_flush(minute, &[flush], &[]).await.unwrap();
    }
    let names = [(PolicyName::parse("p").unwrap(), StateRead::FromHash)];
    let view = |now_minute, minutes| {
        let limiter = &limiter;
        let names = &names;
        async move {
            let mut views = limiter
                .live_views(names, now_minute, minutes)
                .await
                .unwrap();
            assert_eq!(views.len(), 1);
            views.remove(0).unwrap()
        }
    };

    // Minutes -6..=3: both hours.
    let across = view(HOUR_START + 3, 10).await;
    assert_eq!(across.state, None, "the policy itself is not in Redis");
    let zero = [0; 4];
    let mut expected: Vec<(i64, [u64; 4])> = (-6..=3).map(|m| (m, zero)).collect();
    expected[4].1 = [3, 1, 2, 4];
    expected[8].1 = [5, 0, 1, 0];
    assert_eq!(read(&across.minutes), expected);

    // Minutes 0..=3: this hour only.
    let within = view(HOUR_START + 3, 4).await;
    assert_eq!(
        read(&within.minutes),
        [(0, zero), (1, zero), (2, [5, 0, 1, 0]), (3, zero)]
    );

    // Minutes -3..=-2: the previous hour only.
    let before = view(HOUR_START - 2, 2).await;
    assert_eq!(read(&before.minutes), [(-3, zero), (-2, [3, 1, 2, 4])]);
}
