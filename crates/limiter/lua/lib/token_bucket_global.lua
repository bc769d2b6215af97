-- One acquire of a global token-bucket policy, from its hash's fields as read: shared by
-- the single script (token_bucket.lua) and the batch script (acquire_batch.lua), so
-- that both decide exactly alike. Loaded after lib/token_bucket.lua and
-- lib/acquire_gate.lua (whose policy_gate it uses); it only defines.
--
-- TOKEN_BUCKET_FIELDS  the hash fields to read, in this order, with HMGET
-- token_bucket_gate(h, app, permits)  the checks before a decision, on h, the HMGET reply
--   of TOKEN_BUCKET_FIELDS: a refusal's reply (lib/acquire_gate.lua's policy_gate),
--   or nil and the policy's figures:
--   max_permits, rate, version, enabled, shadow
-- token_bucket_global(h, permits, app, now)  one acquire: the gate, then the decision
--   (lib/token_bucket.lua) on the state in h[6] and h[7] (the caller may keep h and put
--   the state returned there, to decide the next request on the same bucket); now is the
--   ms of Redis' clock (lib/clock.lua's reading / 1000). Returns the reply's six figures
--   code, remaining, retry_after_ms, reset_after_ms, max_permits, version, then the state
--   to store, tokens and last, only when there is something to write.
-- store_token_bucket(key, tokens, last)  writes the state into the hash
local TOKEN_BUCKET_FIELDS = {'max_permits', 'rate', 'apps', 'enabled', 'version',
  'curr_permits', 'last_mill_second', 'algorithm', 'scope', 'mode'}

local function token_bucket_gate(h, app, permits)
  local refused, max_permits, version, enabled, shadow, rate = policy_gate('token_bucket', h[1],
    h[3], h[4], h[5], h[8], h[2], h[9], h[10], permits, app)
  if refused then
    return refused
  end
  return nil, max_permits, rate, version, enabled, shadow
end

local function token_bucket_global(h, permits, app, now)
  local refused, max_permits, rate, version, enabled, shadow = token_bucket_gate(h, app, permits)
  if refused then
    return refused[1], refused[2], refused[3], refused[4], refused[5], refused[6]
  end
  local code, remaining, retry, reset, tokens, last = token_bucket_decide(tonumber(h[6]),
    tonumber(h[7]), max_permits, rate, now, permits, enabled)
  -- Shadow mode: granted, though the limit would have denied (nothing consumed either way).
  if code == REPLY.DENIED and shadow then
    code = REPLY.SHADOW_DENIED
  end
  return code, remaining, retry, reset, max_permits, version, tokens, last
end

-- Stores a bucket's state; %.17g keeps every bit of a double (Redis' own conversion would
-- round to 14 digits).
local function store_token_bucket(key, tokens, last)
  redis.call('HSET', key, 'curr_permits', string.format('%.17g', tokens),
    'last_mill_second', string.format('%.17g', last))
end

-- One acquire of a global token-bucket policy as the other algorithms' global acquires
-- take it (lib/acquire_gate.lua's order of arguments), reading and writing the hash:
-- token_bucket_acquire_global(key, _, permits, app, _, now_us) -> reply.
local function token_bucket_acquire_global(key, _, permits, app, _, now_us)
  local h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
  local code, remaining, retry, reset, max_permits, version, tokens, last = token_bucket_global(h,
    permits, app, now_us / 1000)
  if tokens then
    store_token_bucket(key, tokens, last)
  end
  return {code, remaining, retry, reset, max_permits, version}
end

-- token_bucket_give_back_global(key, _, permits, app, _, _, now_us): gives `permits` back
-- to the policy's bucket (lib/token_bucket.lua's token_bucket_give) after the checks of
-- an acquire of one permit. Reply: {code, remaining, 0, reset_after_ms, max_permits,
-- version} as the bucket is after it (acquire_gate.lua's given()), or a refusal.
local function token_bucket_give_back_global(key, _, permits, app, _, _, now_us)
  local h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
  local refused, max_permits, rate, version, enabled = token_bucket_gate(h, app, 1)
  if refused then
    return refused
  end
  local now = now_us / 1000
  local tokens, last = tonumber(h[6]), tonumber(h[7])
  if enabled then
    tokens, last = token_bucket_give(tokens, last, max_permits, rate, now, permits)
    store_token_bucket(key, tokens, last)
  end
  local _, remaining, _, reset = token_bucket_decide(tokens, last, max_permits, rate, now, 1,
    false)
  return given({0, remaining, 0, reset}, {max_permits = max_permits, version = version,
    enabled = enabled})
end
