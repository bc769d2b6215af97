-- A keyed token bucket's stored state, and one acquire on it, shared by the keyed script
-- (keyed/token_bucket.lua) and the batch script (acquire_batch.lua). Loaded ahead of them
-- (after lib/token_bucket.lua and lib/keyed.lua); it only defines.
-- State: little-endian doubles, tokens and the ms of the last write (16 bytes), after the
-- ms until which its expiry is held when it is (24 bytes: lib/keyed.lua's keyed_store). The
-- key expires at the earliest when the bucket would be full again (a bucket that is gone
-- starts full, as a full one reads: a key that outlives that answers the same).
--
-- load_keyed_token_bucket(raw)  the GET reply -> tokens, last, held_until (nil, nil, nil:
--   a new bucket; held_until nil: no expiry held)
-- store_keyed_token_bucket(key, tokens, last, reset_after_ms, now, hold, held_until)
--   writes the state with keyed_store
local function load_keyed_token_bucket(raw)
  if raw then
    local size = #raw
    if size == 24 then
      local held_until, tokens, last = struct.unpack('<d<d<d', raw)
      return tokens, last, held_until
    elseif size == 16 then
      return struct.unpack('<d<d', raw)
    end
  end
  return nil, nil, nil
end

local function store_keyed_token_bucket(key, tokens, last, reset_after_ms, now, hold,
    held_until)
  keyed_store(key, reset_after_ms, now, hold, held_until, '<d<d', '<d<d<d', tokens, last)
end

-- One acquire on a caller's bucket (lib/keyed.lua calls it; the batch script decides many
-- on one bucket with the same three steps, reading and writing the bucket once).
local function token_bucket_keyed(bucket, permits, max_permits, rate, enabled, _, now_us,
    hold)
  local now = now_us / 1000
  local tokens, last, held_until = load_keyed_token_bucket(redis.call('GET', bucket))
  local code, remaining, retry, reset
  code, remaining, retry, reset, tokens, last = token_bucket_decide(tokens, last, max_permits,
    rate, now, permits, enabled)
  if tokens then
    store_keyed_token_bucket(bucket, tokens, last, reset, now, hold, held_until)
  end
  return {code, remaining, retry, reset}
end

-- Gives `permits` back to a caller's bucket (lib/keyed.lua's keyed_give_back calls it):
-- refilled to now, never above max_permits; the key goes when the bucket is full again
-- (its exact expiry set: a give-back is rare, and any version reads what it writes).
local function token_bucket_give_back_keyed(bucket, permits, max_permits, rate, _, _, now_us)
  local now = now_us / 1000
  local tokens, last = load_keyed_token_bucket(redis.call('GET', bucket))
  tokens, last = token_bucket_give(tokens, last, max_permits, rate, now, permits)
  local _, remaining, _, reset = token_bucket_decide(tokens, last, max_permits, rate, now, 1,
    false)
  if permits > 0 then
    store_keyed_token_bucket(bucket, tokens, last, reset, now, false)
  end
  return {REPLY.GRANTED, remaining, 0, reset}
end
