-- Fixed window: at most max_permits per window of window_ms, windows aligned to multiples
-- of window_ms on Redis time. The acquire decision of one policy, taken atomically.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- KEYS[2]  the window counter, <prefix>:{<policy name>}:fw
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  the calling application's slug
--
-- Hash fields read (config, written only by sync_policy.lua): max_permits, apps, enabled,
-- version, algorithm (must be fixed_window), window_ms.
-- Counter KEYS[2]: a hash {start = window start in ms, count = permits granted in it}. It is
-- only ever written together with a PEXPIRE to the end of its window, in this script, so it
-- never lives without a TTL (an INCR and then an EXPIRE from the client, two calls, would
-- leave a counter that never expires if the client died between them).
--
-- (Code 3: granted in shadow mode where it would have denied; see decided() in
-- lua/lib/acquire_gate.lua.)
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted; -1 denied (nothing consumed); 0 no such policy; -2 app not allowed;
--        -3 permits above max_permits; 2 granted unenforced (policy disabled, counter
--        untouched); -4 the policy uses another algorithm: {-4, index, 0, 0, 0, version}
--        with its number in ALGORITHM_INDEX (0 unknown).
--   retry_after_ms  when denied: time to the next window start; else 0.
--   reset_after_ms  time to the next window start, 0 when nothing of this window is used.
local key = KEYS[1]
local counter = KEYS[2]
local permits = tonumber(ARGV[1])
local app = ARGV[2]

-- The checks shared by the algorithms (lua/lib/acquire_gate.lua, loaded ahead of this).
local reply, policy = acquire_gate(key, 'fixed_window', 'window_ms', {}, permits, app)
if reply then
  return reply
end
local max_permits, version, window = policy.max_permits, policy.version, policy.param

-- Redis time in whole microseconds (exact in a double), windows in whole ms.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- The decision (lua/lib/fixed_window.lua, loaded ahead of this).
local c = redis.call('HMGET', counter, 'start', 'count')
local reply, state, ttl = fixed_window_decide(tonumber(c[1]), tonumber(c[2]), max_permits,
  window, now_us, permits, policy.enabled)
if state then
  redis.call('HSET', counter, 'start', state[1], 'count', state[2])
  -- Expire with the window: at least 1 ms ahead, since now < start + window.
  redis.call('PEXPIRE', counter, ttl)
end
return decided(reply, policy)
