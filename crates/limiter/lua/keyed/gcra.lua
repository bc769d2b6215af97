-- GCRA, one caller's bucket of a keyed policy: the arguments and replies of
-- lua/lib/keyed.lua, the acquire gcra_keyed (lua/lib/gcra.lua), both loaded ahead of this
-- and shared with acquire_batch.lua.
return keyed_acquire(gcra_keyed, KEYS[1], ARGV, 1, redis_now_us())
