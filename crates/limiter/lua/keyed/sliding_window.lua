-- Sliding window, one caller's counters of a keyed policy: the arguments and replies of
-- lua/lib/keyed.lua, the acquire sliding_window_keyed (lua/lib/sliding_window.lua), both
-- loaded ahead of this and shared with acquire_batch.lua.
return keyed_acquire(sliding_window_keyed, KEYS[1], ARGV, 1, redis_now_us())
