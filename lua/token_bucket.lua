-- Token bucket with trigger refill: the acquire decision of one policy, taken atomically.
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
--   code  1 granted; -1 denied (nothing consumed); 0 no such policy; -2 app not allowed;
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
  'curr_permits', 'last_mill_second', 'algorithm')
local max_permits = tonumber(h[1])
local rate = tonumber(h[2])
if not max_permits or not h[3] then
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

local tokens = tonumber(h[6])
local last = tonumber(h[7])
if not tokens or not last then
  -- A new bucket starts full.
  tokens = max_permits
  last = now
elseif now > last then
  -- Refill lazily, keeping the fraction: flooring it would lose the time between whole
  -- tokens at every call, so a slow rate polled often would refill slower than promised.
  tokens = tokens + (now - last) * rate / 1000
  last = now
end
-- A clock that went backwards (failover) refills nothing and keeps `last`.
if tokens > max_permits then
  tokens = max_permits
end

-- Times in replies are capped at 10^15 ms (some 31,700 years): a slow rate with a large
-- capacity could otherwise yield more ms than an integer reply holds.
local MAX_MS = 1e15
local function ms_until(amount)
  if amount <= 0 then
    return 0
  end
  return math.min(math.ceil(amount * 1000 / rate), MAX_MS)
end

if h[4] == '0' then
  return {2, math.floor(tokens), 0, ms_until(max_permits - tokens), max_permits, version}
end

-- A hair of tolerance so that float rounding never denies a permit that is due.
local EPSILON = 1e-9
if tokens + EPSILON >= permits then
  tokens = tokens - permits
  if tokens < 0 then
    tokens = 0
  end
  -- %.17g keeps every bit of a double; Redis' own conversion would round to 14 digits.
  redis.call('HSET', key, 'curr_permits', string.format('%.17g', tokens),
    'last_mill_second', string.format('%.17g', last))
  return {1, math.floor(tokens + EPSILON), 0, ms_until(max_permits - tokens), max_permits, version}
end

-- Denied: nothing is consumed and nothing needs writing (refill is a function of time).
return {-1, math.floor(tokens + EPSILON), ms_until(permits - tokens),
  ms_until(max_permits - tokens), max_permits, version}
