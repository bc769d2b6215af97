-- Sliding log, one caller's log of a keyed policy: the arguments and replies of
-- lua/lib/keyed.lua, the acquire sliding_log_keyed (lua/lib/sliding_log.lua), both loaded
-- ahead of this and shared with acquire_batch.lua.
return keyed_acquire(sliding_log_keyed, KEYS[1], ARGV, 1, redis_now_us())
