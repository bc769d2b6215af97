-- Many token-bucket acquires in one call (src/limiter/batch.rs sends the acquires that
-- arrived while the previous call was in flight), decided one after the other in arrival
-- order, each exactly as its single script would decide it at the same instant: the
-- decisions are lib/token_bucket_global.lua (a global policy, token_bucket.lua's) and
-- lib/token_bucket.lua with lib/keyed_token_bucket.lua (a caller's bucket of a keyed
-- policy, keyed/token_bucket.lua's).
--
-- KEYS[i]  request i's policy hash (global) or caller's bucket (keyed)
-- ARGV     per request i, in order, as many as its kind takes:
--            "g", permits, app slug                             a global policy
--            "k", permits, max_permits, rate, enabled, version  a keyed bucket (the config
--                                                               from the instance, as
--                                                               keyed/common.lua takes it)
--
-- Reply: 6 integers per request, in order: its single script's reply.
--
-- One clock reading for the whole batch. A bucket asked for many times is read once and
-- written once (the requests after the first see what those before them took), so a hot
-- bucket costs one read and one write per batch, not per request. Redis runs this for
-- every request of a batch: it allocates no table per request beyond the decision's own.
local now = redis_now_ms()
local hashes = {}   -- global: key -> HMGET reply, kept up to date
local keyed = {}    -- keyed: key -> {tokens, last, reset_after_ms}
local touched = {}  -- keys whose state is to be written at the end, in first-touch order
local out = {}
local n = 0         -- integers in out
local a = 1         -- the first argument of request i
for i = 1, #KEYS do
  local key = KEYS[i]
  local permits = tonumber(ARGV[a + 1])
  local reply, state
  if ARGV[a] == 'g' then
    local h = hashes[key]
    if not h then
      h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
      hashes[key] = h
    end
    reply, state = token_bucket_global(h, permits, ARGV[a + 2], now)
    a = a + 3
    if state then
      if not h.touched then
        h.touched = true
        touched[#touched + 1] = key
      end
      h[6], h[7] = state[1], state[2]
    end
  else
    local b = keyed[key]
    if not b then
      local tokens, last = load_keyed_token_bucket(redis.call('GET', key))
      b = {tokens, last}
      keyed[key] = b
    end
    local max_permits, version = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 5]) or 0
    if not permits or permits < 1 or permits > max_permits or permits ~= math.floor(permits) then
      reply = {-3, 0, 0, 0, max_permits, version}
    else
      reply, state = token_bucket_decide(b[1], b[2], max_permits, tonumber(ARGV[a + 3]), now,
        permits, ARGV[a + 4] ~= '0')
      reply[5], reply[6] = max_permits, version
      if state then
        if not b[3] then
          touched[#touched + 1] = key
        end
        b[1], b[2], b[3] = state[1], state[2], reply[4]
      end
    end
    a = a + 6
  end
  out[n + 1], out[n + 2], out[n + 3] = reply[1], reply[2], reply[3]
  out[n + 4], out[n + 5], out[n + 6] = reply[4], reply[5], reply[6]
  n = n + 6
end
for _, key in ipairs(touched) do
  local h = hashes[key]
  if h then
    store_token_bucket(key, {h[6], h[7]})
  else
    local b = keyed[key]
    store_keyed_token_bucket(key, {b[1], b[2]}, b[3])
  end
end
return out
