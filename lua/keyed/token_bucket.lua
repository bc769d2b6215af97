-- Token bucket, one caller's bucket of a keyed policy (arguments: lua/keyed/common.lua,
-- decision: lua/lib/token_bucket.lua, state: lua/lib/keyed_token_bucket.lua, all loaded
-- ahead of this; token_bucket_batch.lua decides many the same way).
local tokens, last = load_keyed_token_bucket(redis.call('GET', bucket))
local reply, state = token_bucket_decide(tokens, last, max_permits, param, now, permits,
  enabled)
if state then
  store_keyed_token_bucket(bucket, state, reply[4])
end
return finish(reply)
