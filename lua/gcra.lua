-- GCRA (the generic cell rate algorithm, a leaky bucket / funnel kept as one number): a
-- sustained `rate` permits per second with bursts of up to max_permits. The acquire
-- decision of one policy, taken atomically.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  the calling application's slug
--
-- Hash fields read (config, written only by sync_policy.lua): max_permits, rate (permits
-- per second, fractional, > 0), apps, enabled, version, algorithm (must be gcra).
-- State, in the same hash, written only here: tat, the theoretical arrival time in ms
-- (fractional, kept with %.17g).
--
-- With the emission interval T = 1000 / rate ms and the burst tolerance
-- tau = (max_permits - 1) * T, a request of n permits is granted when
--   new_tat - now <= tau + T, where new_tat = max(tat, now) + n * T
-- (for n = 1: tat - now <= tau, the standard test), and then tat = new_tat. A fresh or
-- long idle policy allows max_permits at once, like a full token bucket.
--
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted; -1 denied (nothing written); 0 no such policy; -2 app not allowed;
--        -3 permits above max_permits; 2 granted unenforced (policy disabled, tat
--        untouched); -4 the policy uses another algorithm: {-4, index, 0, 0, 0, version}
--        with its number in ALGORITHM_INDEX (0 unknown).
--   remaining       permits that could be granted at once after this call.
--   retry_after_ms  when denied: time until `permits` would be granted.
--   reset_after_ms  time until the full burst is available again (tat reaches now).
local key = KEYS[1]
local permits = tonumber(ARGV[1])
local app = ARGV[2]

-- The checks shared by the algorithms (lua/lib/acquire_gate.lua, loaded ahead of this).
local reply, policy = acquire_gate(key, 'gcra', 'rate', {'tat'}, permits, app)
if reply then
  return reply
end
local max_permits, version, rate = policy.max_permits, policy.version, policy.param

-- Redis time, in ms with the microseconds kept.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

local T = 1000 / rate
local limit = max_permits * T -- tau + T
-- A tat in the past is a full burst: count from now. A tat in the future (a clock that went
-- back, or permits taken) is kept as it is.
local tat = tonumber(policy.extra[1])
if not tat or tat < now then
  tat = now
end

-- A hair of tolerance so that float rounding never denies a permit that is due.
local EPSILON = 1e-9

-- Times in replies are capped at 10^15 ms (some 31,700 years): a slow rate with a large
-- capacity could otherwise yield more ms than an integer reply holds.
local MAX_MS = 1e15
local function ceil_ms(ms)
  if ms <= 0 then
    return 0
  end
  return math.min(math.ceil(ms), MAX_MS)
end

local function remaining_at(tat_)
  local r = math.floor((limit - (tat_ - now)) / T + EPSILON)
  if r < 0 then
    return 0
  end
  if r > max_permits then
    return max_permits
  end
  return r
end

if not policy.enabled then
  return {2, remaining_at(tat), 0, ceil_ms(tat - now), max_permits, version}
end

-- Compared as durations from now, not as absolute times: at the largest capacities with
-- the slowest rates, now + permits * T is so large that adding now loses more than the
-- tolerance, and a full burst would be refused.
local backlog = tat - now
local needed = backlog + permits * T
if needed <= limit + EPSILON * T then
  local new_tat = tat + permits * T
  -- %.17g keeps every bit of a double; Redis' own conversion would round to 14 digits.
  redis.call('HSET', key, 'tat', string.format('%.17g', new_tat))
  return {1, remaining_at(new_tat), 0, ceil_ms(needed), max_permits, version}
end

-- Denied: nothing is written (the tat is a function of the grants only).
return {-1, remaining_at(tat), ceil_ms(needed - limit), ceil_ms(backlog), max_permits,
  version}
