-- The checks every acquire script of the algorithms beyond the token bucket makes first,
-- in the same order and with the same replies. Redis scripts cannot load each other, so
-- this file is prepended to each of them when it is loaded; it only defines a function.
--
-- acquire_gate(key, own, param, extra, permits, app) reads the policy hash `key`: fields
-- max_permits, apps, enabled, version, algorithm, `param` (the algorithm's own parameter:
-- window_ms, lease_ttl_ms or rate), then the fields named in the list `extra`.
-- Returns (reply) when the request ends here:
--   {0, 0, 0, 0, 0, 0}                  no policy (or its parameter missing or not > 0,
--                                       or a keyed policy: field scope)
--   {-4, index, 0, 0, 0, version}       the policy uses another algorithm; index its
--                                       number in ALGORITHM_INDEX, 0 unknown
--   {-2, 0, 0, 0, max_permits, version} the app may not acquire (exact membership)
--   {-3, 0, 0, 0, max_permits, version} permits not a whole number from 1 to max_permits
-- else (nil, policy) with policy.max_permits, .version, .enabled (false when the policy
-- is disabled), .param (a number) and .extra (the extra fields' values, in order).

local function acquire_gate(key, own, param, extra, permits, app)
  local fields = {'max_permits', 'apps', 'enabled', 'version', 'algorithm', param, 'scope'}
  for i = 1, #extra do
    fields[7 + i] = extra[i]
  end
  local h = redis.call('HMGET', key, unpack(fields))
  local max_permits = tonumber(h[1])
  -- A keyed policy (field scope) is no policy for a global script: its buckets are keys
  -- of their own, decided by lua/keyed/ with the config the instance passes.
  if not max_permits or not h[2] or h[7] then
    return {0, 0, 0, 0, 0, 0}
  end
  local version = tonumber(h[4]) or 0
  local algorithm = h[5] or 'token_bucket'
  if algorithm ~= own then
    return {-4, ALGORITHM_INDEX[algorithm] or 0, 0, 0, 0, version}
  end
  local value = tonumber(h[6])
  if not value or value <= 0 then
    return {0, 0, 0, 0, 0, 0}
  end
  -- Exact membership: plain find, so the app name is never read as a Lua pattern.
  if not string.find(h[2], ',' .. app .. ',', 1, true) then
    return {-2, 0, 0, 0, max_permits, version}
  end
  if not permits or permits < 1 or permits > max_permits or permits ~= math.floor(permits) then
    return {-3, 0, 0, 0, max_permits, version}
  end
  local values = {}
  for i = 1, #extra do
    values[i] = h[7 + i]
  end
  return nil, {max_permits = max_permits, version = version, enabled = h[3] ~= '0',
    param = value, extra = values}
end

