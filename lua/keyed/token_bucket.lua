-- Token bucket, one caller's bucket of a keyed policy (arguments: lua/keyed/common.lua,
-- decision: lua/lib/token_bucket.lua, both loaded ahead of this).
-- State: a string of two little-endian doubles, tokens and the ms of the last write,
-- expiring when the bucket would be full again (a bucket that is gone starts full).
local raw = redis.call('GET', bucket)
local tokens, last
if raw and #raw == 16 then
  tokens, last = struct.unpack('<d<d', raw)
end
local reply, state = token_bucket_decide(tokens, last, max_permits, param, now, permits,
  enabled)
if state then
  if reply[4] <= 0 then
    redis.call('DEL', bucket)
  else
    redis.call('SET', bucket, struct.pack('<d<d', state[1], state[2]), 'PX',
      string.format('%d', reply[4] + 1))
  end
end
return finish(reply)
