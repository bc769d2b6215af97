-- Concurrency leases, one caller's leases of a keyed policy (arguments:
-- lua/keyed/common.lua, decision: lua/lib/concurrency.lua, both loaded ahead of this). The
-- bucket is the sorted set of leases itself; it expires with its last lease.
return finish(concurrency_acquire(bucket, max_permits, param, now, permits, extra, enabled))
