-- The checks every global acquire makes first, in the same order and with the same
-- replies, written once: policy_gate for the fields as read from the policy's hash, and
-- acquire_gate, which reads them for the algorithms beyond the token bucket (the token
-- bucket reads its fields with its state in one HMGET, lib/token_bucket_global.lua, and
-- gates them here too). Redis scripts cannot load each other, so this file is prepended
-- to each script that uses it when it is loaded; it only defines functions.
--
-- policy_gate(own, max_permits, apps, enabled, version, algorithm, param, scope, mode,
-- permits, app) takes the hash's fields as HMGET returned them (strings, or nil when
-- missing; `param` is the algorithm's own parameter: rate, window_ms or lease_ttl_ms),
-- the algorithm `own` of the calling script, and the request. Returns (reply) when the
-- request ends here:
--   {NO_SUCH_POLICY, 0, 0, 0, 0, 0}               no policy (or its parameter missing or
--                                                 not > 0, or a keyed policy: field scope)
--   {WRONG_ALGORITHM, index, 0, 0, 0, version}    the policy uses another algorithm; index
--                                                 its number in ALGORITHM_INDEX, 0 unknown
--   {APP_NOT_ALLOWED, 0, 0, 0, max_permits, version}  the app may not acquire (exact
--                                                 membership)
--   {PERMITS_REFUSED, 0, 0, 0, max_permits, version}  permits not a whole number from 1
--                                                 to max_permits
-- else (nil, max_permits, version, enabled, shadow, param), the numbers as numbers,
-- enabled false when the policy is disabled, shadow true in shadow mode. (The codes are
-- the table REPLY, put ahead of every script from the Rust side's reply codes.)
--
-- acquire_gate(key, own, param, extra, permits, app) reads the policy hash `key`: the
-- fields above, then the fields named in the list `extra`, and gates them. Returns
-- (reply) when the request ends here, else (nil, policy) with policy.max_permits,
-- .version, .enabled, .shadow, .param and .extra (the extra fields' values, in order).
--
-- decided(reply, policy) completes a decision's reply with the policy's figures, and turns
-- a shadow policy's denial into SHADOW_DENIED: granted, though the limit would have denied
-- (nothing was consumed, exactly as for the denial).

local function policy_gate(own, max_permits, apps, enabled, version, algorithm, param, scope,
    mode, permits, app)
  max_permits = tonumber(max_permits)
  -- A keyed policy (field scope) is no policy for a global script: its buckets are keys
  -- of their own, decided by lua/keyed/ with the config the instance passes.
  if not max_permits or not apps or scope then
    return {REPLY.NO_SUCH_POLICY, 0, 0, 0, 0, 0}
  end
  version = tonumber(version) or 0
  algorithm = algorithm or 'token_bucket'
  if algorithm ~= own then
    return {REPLY.WRONG_ALGORITHM, ALGORITHM_INDEX[algorithm] or 0, 0, 0, 0, version}
  end
  local value = tonumber(param)
  if not value or value <= 0 then
    return {REPLY.NO_SUCH_POLICY, 0, 0, 0, 0, 0}
  end
  -- Exact membership: slugs never contain a comma, and find() runs with plain=true, so
  -- the app name is never read as a Lua pattern (as a pattern, `app` would match
  -- `myapp`, and `my-app` would not match itself).
  if not string.find(apps, ',' .. app .. ',', 1, true) then
    return {REPLY.APP_NOT_ALLOWED, 0, 0, 0, max_permits, version}
  end
  if not permits or permits < 1 or permits > max_permits or permits ~= math.floor(permits) then
    return {REPLY.PERMITS_REFUSED, 0, 0, 0, max_permits, version}
  end
  return nil, max_permits, version, enabled ~= '0', mode == 'shadow', value
end

local function acquire_gate(key, own, param, extra, permits, app)
  local fields = {'max_permits', 'apps', 'enabled', 'version', 'algorithm', param, 'scope',
    'mode'}
  for i = 1, #extra do
    fields[8 + i] = extra[i]
  end
  local h = redis.call('HMGET', key, unpack(fields))
  local refused, max_permits, version, enabled, shadow, value = policy_gate(own, h[1], h[2],
    h[3], h[4], h[5], h[6], h[7], h[8], permits, app)
  if refused then
    return refused
  end
  local values = {}
  for i = 1, #extra do
    values[i] = h[8 + i]
  end
  return nil, {max_permits = max_permits, version = version, enabled = enabled,
    shadow = shadow, param = value, extra = values}
end

local function decided(reply, policy)
  reply[5] = policy.max_permits
  reply[6] = policy.version
  if reply[1] == REPLY.DENIED and policy.shadow then
    reply[1] = REPLY.SHADOW_DENIED
  end
  return reply
end


-- given(reply, policy) completes a give-back's reply ({code, remaining, _, reset}, the
-- state as it is after it) with the policy's figures: GRANTED when permits went back,
-- UNENFORCED when the policy is disabled (nothing given back), retry_after_ms 0.
local function given(reply, policy)
  reply[1] = REPLY.GRANTED
  if not policy.enabled then
    reply[1] = REPLY.UNENFORCED
  end
  reply[3] = 0
  reply[5] = policy.max_permits
  reply[6] = policy.version
  return reply
end

-- give_back_gate(key, own, param, extra, app) reads and checks the policy hash as an
-- acquire of one permit would (the permits given back may be more than max_permits: the
-- state is capped instead): (reply) when refused, else (nil, policy) as acquire_gate.
local function give_back_gate(key, own, param, extra, app)
  return acquire_gate(key, own, param, extra, 1, app)
end
