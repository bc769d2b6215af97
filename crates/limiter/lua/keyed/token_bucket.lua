-- Token bucket, one caller's bucket of a keyed policy: the arguments and replies of
-- lua/lib/keyed.lua, the acquire token_bucket_keyed (lua/lib/keyed_token_bucket.lua, on
-- lua/lib/token_bucket.lua), all loaded ahead of this and shared with acquire_batch.lua.
return keyed_acquire(token_bucket_keyed, KEYS[1], ARGV, 1, redis_now_us())
