-- Fixed window, one caller's counter of a keyed policy: the arguments and replies of
-- lua/lib/keyed.lua, the acquire fixed_window_keyed (lua/lib/fixed_window.lua), both
-- loaded ahead of this and shared with acquire_batch.lua.
return keyed_acquire(fixed_window_keyed, KEYS[1], ARGV, 1, redis_now_us())
