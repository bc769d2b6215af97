-- Writes one policy's configuration into its hash, never its state unless it must.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- KEYS[2..] optional: the policy's state keys, <prefix>:{<policy name>}:tb, :fw, :log and
--          :leases (any subset, any order; all of them are deleted when the state is reset)
-- ARGV[1]  created_ms: when this incarnation of the policy was created (a policy deleted
--          and created again under the same name is a new incarnation)
-- ARGV[2]  version   ARGV[3] max_permits   ARGV[4] rate   ARGV[5] apps (",a,b,")
-- ARGV[6]  enabled ("1"/"0")
-- ARGV[7]  optional algorithm: token_bucket | fixed_window | sliding_log | sliding_window |
--          concurrency | gcra. Absent or "" means token_bucket (and the field is removed:
--          a missing field means token_bucket to every script).
-- ARGV[8]  optional window_ms (integer >= 1); absent or "" leaves the field as it is.
--          Required (here or already in the hash) by fixed_window, sliding_log and
--          sliding_window; removed for the other algorithms.
-- ARGV[9]  optional lease_ttl_ms (integer >= 1); absent or "" leaves the field as it is.
--          Required (here or already in the hash) by concurrency; removed for the others.
-- ARGV[10] optional scope: per_app | per_key. Absent or "" means global (the field is
--          removed). A keyed policy's hash holds its config only: the global scripts refuse
--          it (its buckets are keys of their own, decided by lua/keyed/).
-- ARGV[11] optional mode: shadow (decide and count, but grant: the acquire scripts answer
--          code 3 where they would deny) or block (kept for the console: the instances deny
--          a blocked policy's acquires themselves, and a stale one's call is enforced here).
--          Absent or "" means enforce (the field is removed).
--
-- Reply: 1 written; 0 nothing to do (same config already there, or a newer one: an
-- instance with an older view never overwrites a newer one, so instances do not fight).
-- An invalid algorithm, window_ms or lease_ttl_ms is an error reply, and nothing is written.
--
-- State is discarded (hash fields curr_permits, last_mill_second, tat, sw_start, sw_curr,
-- sw_prev, and every key in KEYS[2..]) when the policy is a new incarnation, when its
-- algorithm or scope changes, or when window_ms changes for a windowed algorithm. Otherwise the
-- token bucket (curr_permits, last_mill_second, or its state key :tb) is only touched when the
-- rate changes (the tokens earned so far are settled at the old rate first) or max_permits is
-- lowered below it (clamped); its state key also takes the new configuration's id (its
-- created_ms and version, lib/token_bucket_global.lua). An unrelated update never refills a bucket (rewriting the state on every
-- sync would hand every client a full bucket each time the sync runs). Other
-- algorithms keep their state across config changes (a lowered max_permits denies until
-- enough usage has aged out; a changed lease_ttl_ms applies to new leases).
local key = KEYS[1]
local created = tonumber(ARGV[1])
local version = tonumber(ARGV[2])
local max_permits = tonumber(ARGV[3])

local function given(v)
  return v ~= nil and v ~= ''
end

local WINDOWED = {fixed_window = true, sliding_log = true, sliding_window = true}

local algorithm = 'token_bucket'
if given(ARGV[7]) then
  algorithm = ARGV[7]
end
-- ALGORITHM_INDEX (every algorithm's name) is defined ahead of this script when loaded.
if not ALGORITHM_INDEX[algorithm] then
  return redis.error_reply('ERR unknown algorithm: ' .. algorithm)
end

local function positive_int(name, v)
  if not given(v) then
    return nil, nil
  end
  local n = tonumber(v)
  if not n or n < 1 or n ~= math.floor(n) or tostring(n) ~= v then
    return nil, redis.error_reply('ERR ' .. name .. ' must be an integer >= 1, got ' .. v)
  end
  return v, nil
end
local window_arg, err = positive_int('window_ms', ARGV[8])
if err then
  return err
end
local lease_arg
lease_arg, err = positive_int('lease_ttl_ms', ARGV[9])
if err then
  return err
end

local scope = ARGV[10]
if given(scope) and scope ~= 'per_app' and scope ~= 'per_key' then
  return redis.error_reply('ERR unknown scope: ' .. scope)
end
if not given(scope) then
  scope = false
end

local mode = ARGV[11]
if given(mode) and mode ~= 'shadow' and mode ~= 'block' then
  return redis.error_reply('ERR unknown mode: ' .. mode)
end
if not given(mode) then
  mode = false
end

local h = redis.call('HMGET', key, 'created_ms', 'version', 'max_permits', 'rate', 'apps',
  'enabled', 'curr_permits', 'last_mill_second', 'algorithm', 'window_ms', 'lease_ttl_ms',
  'scope', 'mode')
local cur_created = tonumber(h[1])
local cur_version = tonumber(h[2])
local cur_algorithm = h[9] or 'token_bucket'

if WINDOWED[algorithm] and not window_arg and not h[10] then
  return redis.error_reply('ERR ' .. algorithm .. ' needs window_ms')
end
if algorithm == 'concurrency' and not lease_arg and not h[11] then
  return redis.error_reply('ERR concurrency needs lease_ttl_ms')
end

-- Whether the hash holds exactly the parameters this algorithm takes, as given (a field
-- HMGET did not find is `false` in Lua).
local function same_param(used, arg, current)
  if used then
    return current and (not arg or current == arg)
  end
  return not current
end

if cur_created and cur_version then
  if cur_created > created or (cur_created == created and cur_version > version) then
    return 0
  end
  if cur_created == created and cur_version == version and h[3] == ARGV[3]
      and h[4] == ARGV[4] and h[5] == ARGV[5] and h[6] == ARGV[6]
      and cur_algorithm == algorithm and h[12] == scope and h[13] == mode
      and same_param(WINDOWED[algorithm], window_arg, h[10])
      and same_param(algorithm == 'concurrency', lease_arg, h[11]) then
    return 0
  end
end

local tokens = tonumber(h[7])
local last = tonumber(h[8])
local reset = cur_created ~= created or cur_algorithm ~= algorithm or h[12] ~= scope
    or (WINDOWED[algorithm] and window_arg and h[10] ~= window_arg)
if reset then
  -- A new incarnation, another algorithm, scope or window: start from nothing used (a
  -- new, full bucket), whatever algorithm left state behind. (A keyed policy's buckets
  -- are named after its incarnation, algorithm, scope and window: they start afresh by
  -- themselves.)
  redis.call('HDEL', key, 'curr_permits', 'last_mill_second', 'tat', 'sw_start', 'sw_curr',
    'sw_prev')
  if #KEYS > 1 then
    redis.call('DEL', unpack(KEYS, 2))
  end
else
  -- A token bucket's state, in the hash (curr_permits, last_mill_second) or in its state key
  -- (<prefix>:{<name>}:tb, lib/token_bucket_global.lua): the tokens earned so far settled at
  -- the old rate when the rate changes, clamped to a lowered max_permits.
  local function settled(t_tokens, t_last)
    local changed = false
    local old_rate = tonumber(h[4])
    local old_max = tonumber(h[3])
    if old_rate and h[4] ~= ARGV[4] then
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
      if now > t_last then
        t_tokens = t_tokens + (now - t_last) * old_rate / 1000
        if old_max and t_tokens > old_max then
          t_tokens = old_max
        end
        t_last = now
        changed = true
      end
    end
    if t_tokens > max_permits then
      t_tokens = max_permits
      changed = true
    end
    return t_tokens, t_last, changed
  end
  if algorithm == 'token_bucket' and tokens and last then
    local changed
    tokens, last, changed = settled(tokens, last)
    if changed then
      redis.call('HSET', key, 'curr_permits', string.format('%.17g', tokens),
        'last_mill_second', string.format('%.17g', last))
    end
  end
  -- The state key always takes the new configuration's id, so that an instance whose view
  -- is older reads the hash instead of deciding with its own.
  local tb_key = nil
  for i = 2, #KEYS do
    if string.sub(KEYS[i], -3) == ':tb' then
      tb_key = KEYS[i]
    end
  end
  local raw = tb_key and redis.call('GET', tb_key)
  if algorithm == 'token_bucket' and raw and #raw == 32 then
    local t_tokens, t_last = struct.unpack('<d<d', raw)
    t_tokens, t_last = settled(t_tokens, t_last)
    redis.call('SET', tb_key, struct.pack('<d<d<i8<i8', t_tokens, t_last, created, version))
  end
end

redis.call('HSET', key, 'created_ms', ARGV[1], 'version', ARGV[2], 'max_permits', ARGV[3],
  'rate', ARGV[4], 'apps', ARGV[5], 'enabled', ARGV[6])
if given(ARGV[7]) then
  redis.call('HSET', key, 'algorithm', algorithm)
else
  redis.call('HDEL', key, 'algorithm')
end
-- A parameter the algorithm does not use goes, so no stale field lingers (or costs memory).
if not WINDOWED[algorithm] then
  redis.call('HDEL', key, 'window_ms')
elseif window_arg then
  redis.call('HSET', key, 'window_ms', window_arg)
end
if algorithm ~= 'concurrency' then
  redis.call('HDEL', key, 'lease_ttl_ms')
elseif lease_arg then
  redis.call('HSET', key, 'lease_ttl_ms', lease_arg)
end
if scope then
  redis.call('HSET', key, 'scope', scope)
else
  redis.call('HDEL', key, 'scope')
end
if mode then
  redis.call('HSET', key, 'mode', mode)
else
  redis.call('HDEL', key, 'mode')
end
return 1
