//! `lua/episodes.lua`, through `Limiter::episodes`: the episodes webhooks report, kept
//! once in Redis for every instance. Each change is answered to exactly one caller, however
//! many pass the same denials at once.

use std::time::Duration;

use futures_util::future::join_all;
use ratekeeper_limiter::{Denied, EpisodeChange, Limiter, Nearness, Transition};

use crate::helpers::{redis_url, test_prefix};

/// Three instances' limiters on one Redis and prefix.
fn instances(prefix: &str) -> Vec<Limiter> {
    (0..3)
        .map(|_| Limiter::new(&redis_url(), prefix, Duration::from_secs(5)).unwrap())
        .collect()
}

fn kinds(changes: &[EpisodeChange]) -> Vec<(Transition, &str)> {
    changes
        .iter()
        .map(|c| (c.transition, c.member.as_str()))
        .collect()
}

/// Every instance passes `denied` at once; every change any of them got.
async fn all_pass(limiters: &[Limiter], denied: &[Denied<'_>]) -> Vec<EpisodeChange> {
    let calls = limiters.iter().map(|l| l.episodes(denied, &[]));
    join_all(calls)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect()
}

#[tokio::test]
async fn an_episode_starts_once_however_many_instances_saw_its_denials() {
    let limiters = instances(&test_prefix("episodes"));
    let hour = 3_600_000;
    let denied = [
        Denied {
            member: "w1 checkout",
            quiet_ms: hour,
        },
        Denied {
            member: "w2 checkout",
            quiet_ms: hour,
        },
    ];
    let changes = all_pass(&limiters, &denied).await;
    let mut got = kinds(&changes);
    got.sort_by_key(|(_, m)| m.to_string());
    assert_eq!(
        got,
        [
            (Transition::Denying, "w1 checkout"),
            (Transition::Denying, "w2 checkout")
        ]
    );
    // More denials within the quiet period are the same episode; nothing ends.
    for _ in 0..3 {
        assert_eq!(all_pass(&limiters, &denied).await, []);
    }
    assert_eq!(all_pass(&limiters, &[]).await, []);
}

#[tokio::test]
async fn an_episode_ends_once_after_its_quiet_period_and_the_next_denial_starts_another() {
    let limiters = instances(&test_prefix("episodes"));
    // A quiet period of nothing: the episode is over at the next call without a denial.
    let denied = [Denied {
        member: "w1 search",
        quiet_ms: 0,
    }];
    let started = limiters[0].episodes(&denied, &[]).await.unwrap();
    assert_eq!(kinds(&started), [(Transition::Denying, "w1 search")]);

    let ended = all_pass(&limiters, &[]).await;
    assert_eq!(kinds(&ended), [(Transition::Recovered, "w1 search")]);
    // It names when the episode began.
    assert_eq!(ended[0].since_ms, started[0].since_ms);
    assert_eq!(all_pass(&limiters, &[]).await, []);

    // Each instance's call on its own: they reach Redis in any order, not the limiters'.
    let calls = limiters.iter().map(|l| l.episodes(&denied, &[]));
    let per_call: Vec<Vec<EpisodeChange>> = join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    // The first call to run starts it; a later one (after no quiet time) may end and
    // start it again, but every start has its end before it.
    assert!(
        per_call
            .iter()
            .any(|c| kinds(c) == [(Transition::Denying, "w1 search")]),
        "{per_call:?}"
    );
    let again: Vec<EpisodeChange> = per_call.into_iter().flatten().collect();
    let got = kinds(&again);
    let starts = got
        .iter()
        .filter(|(t, _)| *t == Transition::Denying)
        .count();
    let ends = got
        .iter()
        .filter(|(t, _)| *t == Transition::Recovered)
        .count();
    assert_eq!(starts, ends + 1, "{got:?}");
}

#[tokio::test]
async fn nearing_the_limit_is_reported_once_until_the_policy_is_clear_of_it_again() {
    let limiters = instances(&test_prefix("episodes"));
    let near = |is: bool| {
        [Nearness {
            member: "w3 upload",
            near: is,
        }]
    };
    let calls = limiters
        .iter()
        .map(|l| async move { l.episodes(&[], &near(true)).await });
    let changes: Vec<EpisodeChange> = join_all(calls)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();
    assert_eq!(kinds(&changes), [(Transition::NearLimit, "w3 upload")]);
    assert_eq!(limiters[1].episodes(&[], &near(true)).await.unwrap(), []);

    assert_eq!(limiters[2].episodes(&[], &near(false)).await.unwrap(), []);
    let again = limiters[0].episodes(&[], &near(true)).await.unwrap();
    assert_eq!(kinds(&again), [(Transition::NearLimit, "w3 upload")]);
}
