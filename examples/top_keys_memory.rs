//! How much memory one worker's top-callers sketch holds after a flush interval with N
//! distinct callers, for N from 1,000 to 1,000,000: measured with an instrumented allocator
//! (bytes allocated and not yet freed), not estimated. bench/acquire.sh runs it:
//!
//!     cargo run --release --example top_keys_memory
//!
//! Each caller is recorded twice as granted and once as denied, with one heavy hitter
//! among them, so both sketches are full and busy.
//!
//! Then the tallies of many policies: two workers each decide 10,000 and 100,000 policies
//! once, for one caller (an application), as over many policies between two flushes; the
//! bytes the tallies hold, and those of the list a flush takes from them (the tables go
//! as the list fills).

#![forbid(unsafe_code)]

use std::alloc::System;

use ratekeeper::acquire::TallyRegistry;
use ratekeeper_limiter::Decision;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    println!("distinct callers  sketch bytes held  callers reported  heavy hitter's count");
    for distinct in [1_000u64, 10_000, 100_000, 1_000_000] {
        let registry = TallyRegistry::default();
        let worker = registry.for_worker();
        let region = Region::new(ALLOCATOR);
        let mut caller = String::with_capacity(32);
        for i in 0..distinct {
            caller.clear();
            caller.push_str("user-");
            caller.push_str(&i.to_string());
            worker.record("logins", &caller, Decision::Granted);
            worker.record("logins", &caller, Decision::Granted);
            worker.record("logins", &caller, Decision::Denied);
            if i % 10 == 0 {
                worker.record("logins", "the-abuser", Decision::Denied);
            }
        }
        let held = held_since(&region);
        let taken = registry.take();
        let reported = taken[0].granted.len() + taken[0].denied.len();
        let abuser = taken[0]
            .denied
            .iter()
            .find(|(k, _)| k == "the-abuser")
            .map_or(0, |(_, n)| *n);
        println!("{distinct:>16}  {held:>17}  {reported:>16}  {abuser:>20}");
    }
    println!();
    println!(
        "policies decided by 2 workers  tallies' bytes held  per policy  flush list per policy"
    );
    for policies in [10_000u64, 100_000] {
        let registry = TallyRegistry::default();
        let workers = [registry.for_worker(), registry.for_worker()];
        let names: Vec<String> = (0..policies).map(|i| format!("p{i}")).collect();
        let region = Region::new(ALLOCATOR);
        for name in &names {
            for worker in &workers {
                worker.record(name, "bench", Decision::Granted);
            }
        }
        let held = held_since(&region);
        let region = Region::new(ALLOCATOR);
        let taken = registry.take();
        // The take frees the tables as it fills the list: what it holds after is the list.
        let list = held + held_since(&region);
        assert_eq!(taken.len() as u64, policies);
        println!(
            "{policies:>30}  {held:>19}  {:>10}  {:>21}",
            held / policies as isize,
            list / policies as isize
        );
    }
}

/// Bytes allocated and not freed since the region began (a realloc counts its growth).
fn held_since(region: &Region<'_, System>) -> isize {
    let change = region.change();
    change.bytes_allocated as isize - change.bytes_deallocated as isize + change.bytes_reallocated
}
