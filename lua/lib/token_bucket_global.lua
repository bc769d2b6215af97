-- One acquire of a global token-bucket policy, from its hash's fields as read: shared by
-- the single script (token_bucket.lua) and the batch script (acquire_batch.lua), so
-- that both decide exactly alike. Loaded after lib/token_bucket.lua; it only defines.
--
-- TOKEN_BUCKET_FIELDS  the hash fields to read, in this order, with HMGET
-- token_bucket_global(h, permits, app, now)
--   h        the HMGET reply of TOKEN_BUCKET_FIELDS (the caller may keep it and update it
--            with the state returned, to decide the next request on the same bucket)
--   permits  a number or nil; app the caller's slug; now the ms of Redis' clock
--            (lib/clock.lua's reading / 1000)
-- Returns the reply {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
-- (codes as token_bucket.lua documents them), and the state to store {tokens, last}, or
-- nil when nothing is to be written.
local TOKEN_BUCKET_FIELDS = {'max_permits', 'rate', 'apps', 'enabled', 'version',
  'curr_permits', 'last_mill_second', 'algorithm', 'scope', 'mode'}

local function token_bucket_global(h, permits, app, now)
  local max_permits = tonumber(h[1])
  local rate = tonumber(h[2])
  -- A keyed policy (field scope) is no policy for this script: its buckets are keys of
  -- their own, decided by lua/keyed/ with the config the instance passes.
  if not max_permits or not h[3] or h[9] then
    return {0, 0, 0, 0, 0, 0}, nil
  end
  local version = tonumber(h[5]) or 0

  local algorithm = h[8] or 'token_bucket'
  if algorithm ~= 'token_bucket' then
    return {-4, ALGORITHM_INDEX[algorithm] or 0, 0, 0, 0, version}, nil
  end
  if not rate then
    return {0, 0, 0, 0, 0, 0}, nil
  end

  -- Exact membership: slugs never contain a comma, and find() runs with plain=true, so the
  -- app name is never read as a Lua pattern (as a pattern, `app` would match `myapp`, and
  -- `my-app` would not match itself).
  if not string.find(h[3], ',' .. app .. ',', 1, true) then
    return {-2, 0, 0, 0, max_permits, version}, nil
  end
  if not permits or permits < 1 or permits > max_permits then
    return {-3, 0, 0, 0, max_permits, version}, nil
  end

  -- The decision (lib/token_bucket.lua).
  local reply, state = token_bucket_decide(tonumber(h[6]), tonumber(h[7]), max_permits, rate,
    now, permits, h[4] ~= '0')
  reply[5] = max_permits
  reply[6] = version
  -- Shadow mode: granted, though the limit would have denied (nothing consumed either way).
  if reply[1] == -1 and h[10] == 'shadow' then
    reply[1] = 3
  end
  return reply, state
end

-- Stores a bucket's state; %.17g keeps every bit of a double (Redis' own conversion would
-- round to 14 digits).
local function store_token_bucket(key, state)
  redis.call('HSET', key, 'curr_permits', string.format('%.17g', state[1]),
    'last_mill_second', string.format('%.17g', state[2]))
end
