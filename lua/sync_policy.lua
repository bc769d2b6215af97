-- Writes one policy's configuration into its hash, never its bucket unless it must.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- ARGV[1]  created_ms: when this incarnation of the policy was created (a policy deleted
--          and created again under the same name is a new incarnation)
-- ARGV[2]  version   ARGV[3] max_permits   ARGV[4] rate   ARGV[5] apps (",a,b,")
-- ARGV[6]  enabled ("1"/"0")
--
-- Reply: 1 written; 0 nothing to do (same config already there, or a newer one: an
-- instance with an older view never overwrites a newer one, so instances do not fight).
--
-- The bucket state (curr_permits, last_mill_second) is only touched when the rate changes
-- (the tokens earned so far are settled at the old rate first) or max_permits is lowered
-- below it (clamped). An unrelated update never refills a bucket, unlike the seed's init.
local key = KEYS[1]
local created = tonumber(ARGV[1])
local version = tonumber(ARGV[2])
local max_permits = tonumber(ARGV[3])

local h = redis.call('HMGET', key, 'created_ms', 'version', 'max_permits', 'rate', 'apps',
  'enabled', 'curr_permits', 'last_mill_second')
local cur_created = tonumber(h[1])
local cur_version = tonumber(h[2])

if cur_created and cur_version then
  if cur_created > created or (cur_created == created and cur_version > version) then
    return 0
  end
  if cur_created == created and cur_version == version and h[3] == ARGV[3]
      and h[4] == ARGV[4] and h[5] == ARGV[5] and h[6] == ARGV[6] then
    return 0
  end
end

local tokens = tonumber(h[7])
local last = tonumber(h[8])
if cur_created ~= created then
  -- A new incarnation starts with a new, full bucket.
  redis.call('HDEL', key, 'curr_permits', 'last_mill_second')
elseif tokens and last then
  local old_rate = tonumber(h[4])
  local old_max = tonumber(h[3])
  local changed = false
  if old_rate and h[4] ~= ARGV[4] then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
    if now > last then
      tokens = tokens + (now - last) * old_rate / 1000
      if old_max and tokens > old_max then
        tokens = old_max
      end
      last = now
      changed = true
    end
  end
  if tokens > max_permits then
    tokens = max_permits
    changed = true
  end
  if changed then
    redis.call('HSET', key, 'curr_permits', string.format('%.17g', tokens),
      'last_mill_second', string.format('%.17g', last))
  end
end

redis.call('HSET', key, 'created_ms', ARGV[1], 'version', ARGV[2], 'max_permits', ARGV[3],
  'rate', ARGV[4], 'apps', ARGV[5], 'enabled', ARGV[6])
return 1
