//! Sign-in buckets kept in this process, used while Redis cannot be reached: the same
//! limits as the Redis buckets (`login_guard`), counted per instance. An outage of the
//! limiter must neither lock the admins out of the console nor let guessing go unlimited.
//! Bounded: at most `CAPACITY` buckets; past that, the one touched longest ago is dropped.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use super::own_buckets::OwnBucket;

/// Buckets kept at most: a few hundred KB.
const CAPACITY: usize = 10_000;

struct Bucket {
    tokens: f64,
    touched: Instant,
}

/// Token buckets by name, in memory.
#[derive(Default)]
pub struct LocalBuckets {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl LocalBuckets {
    /// Takes a permit of the bucket `name` at `now`; `Some(ms to wait)` when there is none.
    pub fn take(&self, name: &str, limit: OwnBucket, now: Instant) -> Option<i64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !buckets.contains_key(name) && buckets.len() >= CAPACITY {
            let oldest = buckets
                .iter()
                .min_by_key(|(_, b)| b.touched)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                buckets.remove(&oldest);
            }
        }
        let max = limit.max_permits as f64;
        let bucket = buckets.entry(name.to_owned()).or_insert(Bucket {
            tokens: max,
            touched: now,
        });
        let elapsed = now.saturating_duration_since(bucket.touched).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * limit.rate).min(max);
        bucket.touched = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            None
        } else {
            let ms = ((1.0 - bucket.tokens) / limit.rate * 1000.0).ceil() as i64;
            Some(ms.max(1))
        }
    }

    /// Forgets the bucket `name` (full again at its next use).
    pub fn forget(&self, name: &str) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.remove(name);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const LIMIT: OwnBucket = OwnBucket {
        max_permits: 3,
        rate: 0.5,
    };

    #[test]
    fn a_bucket_empties_then_refills_at_its_rate() {
        let buckets = LocalBuckets::default();
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(buckets.take("a", LIMIT, start), None);
        }
        assert_eq!(buckets.take("a", LIMIT, start), Some(2000));
        // Another bucket is untouched.
        assert_eq!(buckets.take("b", LIMIT, start), None);
        assert_eq!(
            buckets.take("a", LIMIT, start + Duration::from_secs(2)),
            None
        );
        buckets.forget("a");
        assert_eq!(
            buckets.take("a", LIMIT, start + Duration::from_secs(2)),
            None
        );
    }

    #[test]
    fn memory_is_bounded() {
        let buckets = LocalBuckets::default();
        let start = Instant::now();
        for n in 0..CAPACITY + 10 {
            buckets.take(
                &n.to_string(),
                LIMIT,
                start + Duration::from_millis(n as u64),
            );
        }
        assert_eq!(buckets.len(), CAPACITY);
    }
}
