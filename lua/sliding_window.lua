-- Sliding window, the two-counter approximation: O(1) memory whatever the limit. The
-- acquire decision of one policy, taken atomically.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  the calling application's slug
--
-- Hash fields read (config, written only by sync_policy.lua): max_permits, apps, enabled,
-- version, algorithm (must be sliding_window), window_ms.
-- State, in the same hash (so it lives and dies with the policy, no key of its own and no
-- TTL to manage), written only here: sw_start (start of the current aligned window, ms),
-- sw_curr (permits granted in it), sw_prev (permits granted in the window before it).
--
-- The decision itself is lua/lib/sliding_window.lua:
--   estimate = prev * (1 - elapsed / window_ms) + curr, granted when estimate + permits
--   <= max_permits.
--
-- The approximation (known, accepted for O(1) memory): it assumes the previous window's
-- grants were spread evenly over it. Since estimate >= curr, no aligned window ever grants
-- more than max_permits. But a true sliding window of window_ms that straddles two aligned
-- windows can hold more than max_permits when the previous window's grants bunched at its
-- end (at worst nearly 2 x max_permits), and fewer are granted than a true sliding log would
-- allow when they bunched at its start. Under steady load it tracks the sliding log closely.
--
-- (Code 3: granted in shadow mode where it would have denied; see decided() in
-- lua/lib/acquire_gate.lua.)
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted; -1 denied (nothing consumed); 0 no such policy; -2 app not allowed;
--        -3 permits above max_permits; 2 granted unenforced (policy disabled, counters
--        untouched); -4 the policy uses another algorithm: {-4, index, 0, 0, 0, version}
--        with its number in ALGORITHM_INDEX (0 unknown).
--   remaining       floor(max_permits - estimate) after this call.
--   retry_after_ms  when denied: time until the estimate leaves room for `permits`.
--   reset_after_ms  time until the estimate is back to 0 (nothing used): the end of the
--                   next window when this one has grants, of this window when only the
--                   previous one had some, else 0.
local key = KEYS[1]
local permits = tonumber(ARGV[1])
local app = ARGV[2]

-- The checks shared by the algorithms (lua/lib/acquire_gate.lua, loaded ahead of this).
local reply, policy = acquire_gate(key, 'sliding_window', 'window_ms', {'sw_start', 'sw_curr', 'sw_prev'}, permits, app)
if reply then
  return reply
end
local max_permits, version, window = policy.max_permits, policy.version, policy.param

-- Redis time in whole microseconds (exact in a double), windows in whole ms.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- The decision (lua/lib/sliding_window.lua, loaded ahead of this).
local reply, state = sliding_window_decide(tonumber(policy.extra[1]),
  tonumber(policy.extra[2]), tonumber(policy.extra[3]), max_permits, window, now_us, permits,
  policy.enabled)
if state then
  redis.call('HSET', key, 'sw_start', state[1], 'sw_curr', state[2], 'sw_prev', state[3])
end
return decided(reply, policy)
