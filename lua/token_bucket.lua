-- Token bucket with trigger refill: the acquire decision of one global policy (one bucket
-- for every caller), taken atomically. The decision itself is lua/lib/token_bucket.lua.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  the calling application's slug
--
-- Hash fields. Config, written only by sync_policy.lua: max_permits, rate (permits per
-- second, fractional), apps (",slug1,slug2,"), enabled ("1"/"0"), version, created_ms.
-- State, written only here: curr_permits (fractional), last_mill_second (ms, fractional).
--
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted; -1 denied (nothing consumed); 0 no such policy (or a keyed one);
--        -2 app not allowed;
--        -3 permits above max_permits; 2 granted unenforced (policy disabled, bucket untouched);
--        -4 the policy uses another algorithm (hash field `algorithm`, missing means
--        token_bucket): {-4, index, 0, 0, 0, version} with its number in ALGORITHM_INDEX
--        (0 unknown)
--
-- ALGORITHM_INDEX (algorithm name -> number, for the -4 reply) is defined ahead of this
-- script when it is loaded (src/limiter/scripts.rs, from the Rust side's Algorithm::index).
local key = KEYS[1]
local permits = tonumber(ARGV[1])
local app = ARGV[2]

local h = redis.call('HMGET', key, 'max_permits', 'rate', 'apps', 'enabled', 'version',
  'curr_permits', 'last_mill_second', 'algorithm', 'scope')
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

-- Redis time, in ms with the microseconds kept: every instance sees one clock.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

-- The decision (lua/lib/token_bucket.lua, loaded ahead of this).
local reply, state = token_bucket_decide(tonumber(h[6]), tonumber(h[7]), max_permits, rate,
  now, permits, h[4] ~= '0')
if state then
  -- %.17g keeps every bit of a double; Redis' own conversion would round to 14 digits.
  redis.call('HSET', key, 'curr_permits', string.format('%.17g', state[1]),
    'last_mill_second', string.format('%.17g', state[2]))
end
reply[5] = max_permits
reply[6] = version
return reply
