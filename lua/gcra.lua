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
-- The decision itself is lua/lib/gcra.lua.
--
-- (Code 3: granted in shadow mode where it would have denied; see decided() in
-- lua/lib/acquire_gate.lua.)
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

-- The decision (lua/lib/gcra.lua, loaded ahead of this).
local reply, tat = gcra_decide(tonumber(policy.extra[1]), max_permits, rate, now, permits,
  policy.enabled)
if tat then
  -- %.17g keeps every bit of a double; Redis' own conversion would round to 14 digits.
  redis.call('HSET', key, 'tat', string.format('%.17g', tat))
end
return decided(reply, policy)
