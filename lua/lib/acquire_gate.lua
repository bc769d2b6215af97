-- The checks every acquire script of the algorithms beyond the token bucket makes first,
-- in the same order and with the same replies. Redis scripts cannot load each other, so
-- this file is prepended to each of them when it is loaded; it only defines a function.
--
-- acquire_gate(key, own, param, extra, permits, app) reads the policy hash `key`: fields
-- max_permits, apps, enabled, version, algorithm, `param` (the algorithm's own parameter:
-- window_ms, lease_ttl_ms or rate), scope, mode, then the fields named in the list `extra`.
-- Returns (reply) when the request ends here:
--   {0, 0, 0, 0, 0, 0}                  no policy (or its parameter missing or not > 0,
--                                       or a keyed policy: field scope)
--   {-4, index, 0, 0, 0, version}       the policy uses another algorithm; index its
--                                       number in ALGORITHM_INDEX, 0 unknown
--   {-2, 0, 0, 0, max_permits, version} the app may not acquire (exact membership)
--   {-3, 0, 0, 0, max_permits, version} permits not a whole number from 1 to max_permits
-- else (nil, policy) with policy.max_permits, .version, .enabled (false when the policy
-- is disabled), .shadow (true in shadow mode), .param (a number) and .extra (the extra
-- fields' values, in order).
--
-- decided(reply, policy) completes a decision's reply with the policy's figures, and turns
-- a shadow policy's denial (-1) into code 3: granted, though the limit would have denied
-- (nothing was consumed, exactly as for the denial).

local function acquire_gate(key, own, param, extra, permits, app)
  local fields = {'max_permits', 'apps', 'enabled', 'version', 'algorithm', param, 'scope',
    'mode'}
  for i = 1, #extra do
    fields[8 + i] = extra[i]
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
    values[i] = h[8 + i]
  end
  return nil, {max_permits = max_permits, version = version, enabled = h[3] ~= '0',
    shadow = h[8] == 'shadow', param = value, extra = values}
end

local function decided(reply, policy)
  reply[5] = policy.max_permits
  reply[6] = policy.version
  if reply[1] == -1 and policy.shadow then
    reply[1] = 3
  end
  return reply
end

