//! The GCRA script: a burst, then one permit per emission interval.

use super::{Config, DENIED, GRANTED, Policy};
use crate::lua::scripts::*;

#[tokio::test]
async fn gcra_allows_a_burst_then_one_permit_per_emission_interval() {
    // 0.01 per second: one permit per 100,000 ms, bursts of 5.
    const T: f64 = 100_000.0;
    let mut c = Config::of(Gcra, 5);
    c.rate = 0.01;
    let p = Policy::new(c).await;
    let first = p.acquire(1, "shop").await;
    assert_eq!(first[..3], [GRANTED, 4, 0]);
    assert!((100_000..=100_001).contains(&first[3]), "{first:?}");
    assert_eq!(p.acquire(4, "shop").await[..2], [GRANTED, 0]);
    let tat = p.field("tat").await.unwrap();
    let denied = p.acquire(1, "shop").await;
    assert_eq!(denied[..2], [DENIED, 0]);
    assert!((99_000..=100_001).contains(&denied[2]), "{denied:?}");
    assert!((499_000..=500_001).contains(&denied[3]), "{denied:?}");
    assert_eq!(
        p.field("tat").await.unwrap(),
        tat,
        "a denial writes nothing"
    );
    // Move the arrival time back by one interval: exactly one permit is due.
    let age = |ms: f64| {
        let p = p.clone();
        async move {
            let tat: f64 = p.field("tat").await.unwrap().parse().unwrap();
            p.set_field("tat", format!("{:.17}", tat - ms)).await;
        }
    };
    age(T).await;
    assert_eq!(p.acquire(1, "shop").await[..2], [GRANTED, 0]);
    assert_eq!(p.acquire(1, "shop").await[0], DENIED);
    age(3.0 * T).await;
    assert_eq!(
        p.acquire(4, "shop").await[0],
        DENIED,
        "three intervals are three permits"
    );
    assert_eq!(p.acquire(3, "shop").await[..2], [GRANTED, 0]);
}
