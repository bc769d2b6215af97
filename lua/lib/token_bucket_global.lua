-- One acquire of a global token-bucket policy, from its hash's fields as read: shared by
-- the single script (token_bucket.lua) and the batch script (acquire_batch.lua), so
-- that both decide exactly alike. Loaded after lib/token_bucket.lua; it only defines.
--
-- TOKEN_BUCKET_FIELDS  the hash fields to read, in this order, with HMGET
-- token_bucket_gate(h, app, permits)  the checks before a decision, on h, the HMGET reply
--   of TOKEN_BUCKET_FIELDS: a refusal's reply {code, a, 0, 0, max_permits, version}
--   (codes as token_bucket.lua documents them), or nil and the policy's figures:
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
  local max_permits = tonumber(h[1])
  local rate = tonumber(h[2])
  -- A keyed policy (field scope) is no policy for this script: its buckets are keys of
  -- their own, decided by lua/keyed/ with the config the instance passes.
  if not max_permits or not h[3] or h[9] then
    return {0, 0, 0, 0, 0, 0}
  end
  local version = tonumber(h[5]) or 0

  local algorithm = h[8] or 'token_bucket'
  if algorithm ~= 'token_bucket' then
    return {-4, ALGORITHM_INDEX[algorithm] or 0, 0, 0, 0, version}
  end
  if not rate then
    return {0, 0, 0, 0, 0, 0}
  end

  -- Exact membership: slugs never contain a comma, and find() runs with plain=true, so the
  -- app name is never read as a Lua pattern (as a pattern, `app` would match `myapp`, and
  -- `my-app` would not match itself).
  if not string.find(h[3], ',' .. app .. ',', 1, true) then
    return {-2, 0, 0, 0, max_permits, version}
  end
  if not permits or permits < 1 or permits > max_permits then
    return {-3, 0, 0, 0, max_permits, version}
  end
  return nil, max_permits, rate, version, h[4] ~= '0', h[10] == 'shadow'
end

local function token_bucket_global(h, permits, app, now)
  local refused, max_permits, rate, version, enabled, shadow = token_bucket_gate(h, app, permits)
  if refused then
    return refused[1], refused[2], refused[3], refused[4], refused[5], refused[6]
  end
  local code, remaining, retry, reset, tokens, last = token_bucket_decide(tonumber(h[6]),
    tonumber(h[7]), max_permits, rate, now, permits, enabled)
  -- Shadow mode: granted, though the limit would have denied (nothing consumed either way).
  if code == -1 and shadow then
    code = 3
  end
  return code, remaining, retry, reset, max_permits, version, tokens, last
end

-- Stores a bucket's state; %.17g keeps every bit of a double (Redis' own conversion would
-- round to 14 digits).
local function store_token_bucket(key, tokens, last)
  redis.call('HSET', key, 'curr_permits', string.format('%.17g', tokens),
    'last_mill_second', string.format('%.17g', last))
end
