//! How much memory one worker's top-callers sketch holds after a flush interval with N
//! distinct callers, for N from 1,000 to 1,000,000: measured with a counting allocator
//! (bytes allocated and not yet freed), not estimated. bench/acquire.sh runs it:
//!
//!     cargo run --release --example top_keys_memory
//!
//! Each caller is recorded twice as granted and once as denied, with one heavy hitter
//! among them, so both sketches are full and busy.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use ratekeeper::acquire::TopKeysRegistry;

/// The system allocator, counting the bytes it holds.
struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `dealloc` is passed on as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() {
    println!("distinct callers  sketch bytes held  callers reported  heavy hitter's count");
    for distinct in [1_000u64, 10_000, 100_000, 1_000_000] {
        let registry = TopKeysRegistry::default();
        let worker = registry.for_worker();
        let before = HELD.load(Ordering::Relaxed);
        let mut caller = String::with_capacity(32);
        for i in 0..distinct {
            caller.clear();
            caller.push_str("user-");
            caller.push_str(&i.to_string());
            worker.record("logins", &caller, true);
            worker.record("logins", &caller, true);
            worker.record("logins", &caller, false);
            if i % 10 == 0 {
                worker.record("logins", "the-abuser", false);
            }
        }
        let held = HELD.load(Ordering::Relaxed) - before;
        let taken = registry.take();
        let reported = taken[0].granted.len() + taken[0].denied.len();
        let abuser = taken[0]
            .denied
            .iter()
            .find(|(k, _)| k == "the-abuser")
            .map_or(0, |(_, n)| *n);
        println!("{distinct:>16}  {held:>17}  {reported:>16}  {abuser:>20}");
    }
}
