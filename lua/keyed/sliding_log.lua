-- Sliding log, one caller's log of a keyed policy (arguments: lua/keyed/common.lua,
-- decision: lua/lib/sliding_log.lua, both loaded ahead of this). The bucket is the sorted
-- set of grants itself; it expires with its newest entry.
return finish(sliding_log_decide(bucket, max_permits, param, now_us, permits, extra, enabled))
