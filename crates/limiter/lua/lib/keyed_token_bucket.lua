-- A keyed token bucket's stored state, and one acquire on it, shared by the keyed script
-- (keyed/token_bucket.lua) and the batch script (acquire_batch.lua). Loaded ahead of them
-- (after lib/token_bucket.lua); it only defines.
-- State: a string of little-endian doubles, tokens and the ms of the last write, and, when
-- its expiry is held ahead (below), the ms on Redis' clock until which it is held: 24
-- bytes, or 16 without it. The key expires at the earliest when the bucket would be full
-- again (a bucket that is gone starts full, as a full one reads: a key that outlives that
-- answers the same).
--
-- Setting a key's expiry costs Redis as much again as the SET itself (it moves the key in
-- Redis' table of expiries: bench/README.md), so with `hold` an acquire sets it ahead, to
-- twice the time until the bucket is full again, and records until when; the writes
-- after it that need no later expiry leave it where it is (KEEPTTL). A bucket then lives
-- at most twice as long after its last acquire. Versions before held expiries read only
-- the 16 bytes, so an instance holds expiries only with RATEKEEPER_KEYED_EXPIRY=held (the
-- default, see the README's upgrade note); without `hold` it sets the exact expiry at
-- every write, in the 16 bytes, as they do.
--
-- load_keyed_token_bucket(raw)  the GET reply -> tokens, last, held_until (nil, nil, nil:
--   a new bucket; held_until nil: no expiry held)
-- store_keyed_token_bucket(key, tokens, last, reset_after_ms, now, hold, held_until)
--   writes the state (now: the ms of this decision), or deletes the key when the bucket is
--   full again at once (nothing worth keeping)
local function load_keyed_token_bucket(raw)
  if raw then
    local size = #raw
    if size == 24 then
      return struct.unpack('<d<d<d', raw)
    elseif size == 16 then
      return struct.unpack('<d<d', raw)
    end
  end
  return nil, nil, nil
end

local function store_keyed_token_bucket(key, tokens, last, reset_after_ms, now, hold,
    held_until)
  if reset_after_ms <= 0 then
    redis.call('DEL', key)
  elseif not hold then
    redis.call('SET', key, struct.pack('<d<d', tokens, last), 'PX',
      string.format('%d', reset_after_ms + 1))
  elseif held_until and held_until >= now + reset_after_ms + 1 then
    redis.call('SET', key, struct.pack('<d<d<d', tokens, last, held_until), 'KEEPTTL')
  else
    -- Recorded 1 ms short of the expiry set: Redis counts it from its own clock at the
    -- SET, which may be a hair before this script's reading.
    local ttl = 2 * (reset_after_ms + 1)
    redis.call('SET', key, struct.pack('<d<d<d', tokens, last, now + ttl - 1), 'PX',
      string.format('%d', ttl))
  end
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
