-- A keyed token bucket's stored state, and one acquire on it, shared by the keyed script
-- (keyed/token_bucket.lua) and the batch script (acquire_batch.lua). Loaded ahead of them
-- (after lib/token_bucket.lua); it only defines.
-- State: a string of two little-endian doubles, tokens and the ms of the last write,
-- expiring when the bucket would be full again (a bucket that is gone starts full).
--
-- load_keyed_token_bucket(raw)  the GET reply -> tokens, last (nil, nil: a new bucket)
-- store_keyed_token_bucket(key, tokens, last, reset_after_ms)  writes the state, or deletes
--   the key when the bucket is full again at once (nothing worth keeping)
local function load_keyed_token_bucket(raw)
  if raw and #raw == 16 then
    return struct.unpack('<d<d', raw)
  end
  return nil, nil
end

local function store_keyed_token_bucket(key, tokens, last, reset_after_ms)
  if reset_after_ms <= 0 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, struct.pack('<d<d', tokens, last), 'PX',
      string.format('%d', reset_after_ms + 1))
  end
end

-- One acquire on a caller's bucket (lib/keyed.lua calls it; the batch script decides many
-- on one bucket with the same three steps, reading and writing the bucket once).
local function token_bucket_keyed(bucket, permits, max_permits, rate, enabled, _, now_us)
  local tokens, last = load_keyed_token_bucket(redis.call('GET', bucket))
  local code, remaining, retry, reset
  code, remaining, retry, reset, tokens, last = token_bucket_decide(tokens, last, max_permits,
    rate, now_us / 1000, permits, enabled)
  if tokens then
    store_keyed_token_bucket(bucket, tokens, last, reset)
  end
  return {code, remaining, retry, reset}
end

-- Gives `permits` back to a caller's bucket (lib/keyed.lua's keyed_give_back calls it):
-- refilled to now, never above max_permits; the key goes when the bucket is full again.
local function token_bucket_give_back_keyed(bucket, permits, max_permits, rate, _, _, now_us)
  local now = now_us / 1000
  local tokens, last = load_keyed_token_bucket(redis.call('GET', bucket))
  tokens, last = token_bucket_give(tokens, last, max_permits, rate, now, permits)
  local _, remaining, _, reset = token_bucket_decide(tokens, last, max_permits, rate, now, 1,
    false)
  if permits > 0 then
    store_keyed_token_bucket(bucket, tokens, last, reset)
  end
  return {REPLY.GRANTED, remaining, 0, reset}
end
