-- Many acquires in one call (src/limiter/batch.rs sends the acquires that arrived while
-- the previous call was in flight), decided one after the other in arrival order, each
-- exactly as its single script would decide it at the same instant: every algorithm's
-- acquire, global and keyed, is the function its single script calls (lua/lib/, loaded
-- ahead of this), and all of them read the one clock reading of the batch.
--
-- ARGV     per request, in order, its kind and then as many arguments as the kind takes:
--            kind  the algorithm's number in ALGORITHM_INDEX for a global policy, minus
--                  it for a caller's bucket of a keyed policy
--            global: permits, app slug, and for sliding_log and concurrency the request
--                    or lease id (the single script's ARGV)
--            keyed:  permits, max_permits, param, enabled, version, and for sliding_log
--                    and concurrency the request id or lease members' prefix (the keyed
--                    script's ARGV, lib/keyed.lua)
-- KEYS     per request, in order: the policy's hash and, for a global fixed_window,
--          sliding_log or concurrency policy, its state key (the single script's KEYS);
--          the caller's bucket for a keyed policy
--
-- Reply: 6 integers per request, in order: its single script's reply.
--
-- The token bucket, the default and the most used, is also coalesced: a bucket asked for
-- many times is read once and written once (the requests after the first see what those
-- before them took), so a hot bucket costs one read and one write per batch, not per
-- request. The other algorithms read and write their state per request, as their single
-- scripts do. Redis runs this for every request of a batch: it allocates no table per
-- token-bucket request beyond the decision's own.
local now_us = redis_now_us()
local now = now_us / 1000
local TOKEN_BUCKET = ALGORITHM_INDEX.token_bucket
local SLIDING_LOG = ALGORITHM_INDEX.sliding_log
local CONCURRENCY = ALGORITHM_INDEX.concurrency
local GLOBAL = {
  [ALGORITHM_INDEX.fixed_window] = fixed_window_global,
  [SLIDING_LOG] = sliding_log_global,
  [ALGORITHM_INDEX.sliding_window] = sliding_window_global,
  [CONCURRENCY] = concurrency_global,
  [ALGORITHM_INDEX.gcra] = gcra_global,
}
local KEYED = {
  [ALGORITHM_INDEX.fixed_window] = fixed_window_keyed,
  [SLIDING_LOG] = sliding_log_keyed,
  [ALGORITHM_INDEX.sliding_window] = sliding_window_keyed,
  [CONCURRENCY] = concurrency_keyed,
  [ALGORITHM_INDEX.gcra] = gcra_keyed,
}
-- The global algorithms with a state key beside the hash.
local STATE_KEY = {[ALGORITHM_INDEX.fixed_window] = true, [SLIDING_LOG] = true,
  [CONCURRENCY] = true}

local hashes = {}   -- global token buckets: key -> HMGET reply, kept up to date
local keyed = {}    -- keyed token buckets: key -> {tokens, last, reset_after_ms}
local touched = {}  -- token buckets whose state is to be written at the end, in first-touch order
local out = {}
local n = 0         -- integers in out
local a = 1         -- the request's first argument (its kind)
local k = 1         -- the request's first key
local args = #ARGV
while a <= args do
  local kind = tonumber(ARGV[a])
  local key = KEYS[k]
  local with_id = kind == SLIDING_LOG or kind == -SLIDING_LOG or kind == CONCURRENCY
    or kind == -CONCURRENCY
  local reply, state
  if kind == TOKEN_BUCKET then
    local h = hashes[key]
    if not h then
      h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
      hashes[key] = h
    end
    reply, state = token_bucket_global(h, tonumber(ARGV[a + 1]), ARGV[a + 2], now)
    if state then
      if not h.touched then
        h.touched = true
        touched[#touched + 1] = key
      end
      h[6], h[7] = state[1], state[2]
    end
  elseif kind == -TOKEN_BUCKET then
    local permits, max_permits = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local version = tonumber(ARGV[a + 5]) or 0
    reply = keyed_refusal(permits, max_permits, version)
    if not reply then
      local b = keyed[key]
      if not b then
        local tokens, last = load_keyed_token_bucket(redis.call('GET', key))
        b = {tokens, last}
        keyed[key] = b
      end
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
  elseif kind > 0 then
    local id = nil
    if with_id then
      id = ARGV[a + 3]
    end
    local state_key = nil
    if STATE_KEY[kind] then
      state_key = KEYS[k + 1]
    end
    reply = GLOBAL[kind](key, state_key, tonumber(ARGV[a + 1]), ARGV[a + 2], id, now_us)
  else
    reply = keyed_acquire(KEYED[-kind], key, ARGV, a + 1, now_us)
  end
  out[n + 1], out[n + 2], out[n + 3] = reply[1], reply[2], reply[3]
  out[n + 4], out[n + 5], out[n + 6] = reply[4], reply[5], reply[6]
  n = n + 6
  -- On to the next request: a global one takes 2 arguments after its kind, a keyed one 5,
  -- and each one more with an id.
  if kind > 0 then
    a = a + 3
    k = k + 1
    if STATE_KEY[kind] then
      k = k + 1
    end
  else
    a = a + 6
    k = k + 1
  end
  if with_id then
    a = a + 1
  end
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
