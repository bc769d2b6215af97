-- Sliding log: at most max_permits granted in any window of window_ms ending now. The
-- acquire decision of one policy, taken atomically.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- KEYS[2]  the log, <prefix>:{<policy name>}:log, a sorted set of GRANTED permits only
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  the calling application's slug
-- ARGV[3]  a request id unique to this call (e.g. 16 hex digits made by the caller)
--
-- Hash fields read (config, written only by sync_policy.lua): max_permits, apps, enabled,
-- version, algorithm (must be sliding_log), window_ms.
-- Log KEYS[2]: one member per granted permit, "<now_us>:<request id>:<i>" (i = 1..permits),
-- score = Redis time of the grant in microseconds. Unique even for grants in the same
-- microsecond (bare timestamps as members would collapse concurrent grants into one and
-- under-count); a denial adds nothing (counting rejected attempts too would lock a client
-- that keeps retrying out for ever). Entries that
-- left the window are removed first, so the set never holds more than max_permits members,
-- and it expires with its newest entry.
--
-- (Code 3: granted in shadow mode where it would have denied; see decided() in
-- lua/lib/acquire_gate.lua.)
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted; -1 denied (nothing consumed); 0 no such policy; -2 app not allowed;
--        -3 permits above max_permits; 2 granted unenforced (policy disabled, log
--        untouched); -4 the policy uses another algorithm: {-4, index, 0, 0, 0, version}
--        with its number in ALGORITHM_INDEX (0 unknown).
--   retry_after_ms  when denied: time until enough of the oldest grants leave the window.
--   reset_after_ms  time until the newest grant leaves the window (0 when the log is empty).
local key = KEYS[1]
local log = KEYS[2]
local permits = tonumber(ARGV[1])
local app = ARGV[2]
local request_id = ARGV[3] or ''

-- The checks shared by the algorithms (lua/lib/acquire_gate.lua, loaded ahead of this).
local reply, policy = acquire_gate(key, 'sliding_log', 'window_ms', {}, permits, app)
if reply then
  return reply
end
local max_permits, version, window = policy.max_permits, policy.version, policy.param

-- Redis time in whole microseconds: exact in a double, and the scores' unit.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- The decision (lua/lib/sliding_log.lua, loaded ahead of this).
local reply = sliding_log_decide(log, max_permits, window, now_us, permits, request_id,
  policy.enabled)
return decided(reply, policy)
