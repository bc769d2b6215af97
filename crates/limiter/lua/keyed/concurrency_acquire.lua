-- Concurrency leases, one caller's leases of a keyed policy: the arguments and replies of
-- lua/lib/keyed.lua, the acquire concurrency_keyed (lua/lib/concurrency.lua), both loaded
-- ahead of this and shared with acquire_batch.lua.
return keyed_acquire(concurrency_keyed, KEYS[1], ARGV, 1, redis_now_us())
