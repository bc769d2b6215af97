-- Reads a bucket as it stands now, refilled to this moment, without writing anything.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
--
-- Reply: {} when the policy is not in Redis, else
--   {current_permits (string, fractional), max_permits, rate (string), version, updated_ms}
--   where updated_ms is the time of the last grant (0 when the bucket was never used).
local h = redis.call('HMGET', KEYS[1], 'max_permits', 'rate', 'version', 'curr_permits',
  'last_mill_second')
local max_permits = tonumber(h[1])
local rate = tonumber(h[2])
if not max_permits or not rate then
  return {}
end
local tokens = tonumber(h[4])
local last = tonumber(h[5])
if not tokens or not last then
  return {tostring(max_permits), max_permits, h[2], tonumber(h[3]) or 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
if now > last then
  tokens = tokens + (now - last) * rate / 1000
end
if tokens > max_permits then
  tokens = max_permits
end
return {string.format('%.17g', tokens), max_permits, h[2], tonumber(h[3]) or 0, math.floor(last)}
