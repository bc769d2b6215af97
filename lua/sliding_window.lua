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
-- With windows aligned to multiples of window_ms on Redis time and `elapsed` the time since
-- the current window started:
--   estimate = prev * (1 - elapsed / window_ms) + curr
-- and a request is granted when estimate + permits <= max_permits.
--
-- The approximation (known, accepted for O(1) memory): it assumes the previous window's
-- grants were spread evenly over it. Since estimate >= curr, no aligned window ever grants
-- more than max_permits. But a true sliding window of window_ms that straddles two aligned
-- windows can hold more than max_permits when the previous window's grants bunched at its
-- end (at worst nearly 2 x max_permits), and fewer are granted than a true sliding log would
-- allow when they bunched at its start. Under steady load it tracks the sliding log closely.
--
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
local now_ms = math.floor(now_us / 1000)
local start = now_ms - now_ms % window

local stored_start = tonumber(policy.extra[1])
local curr = 0
local prev = 0
if stored_start then
  if stored_start >= start then
    -- This window (or, after a clock that went back, a later one: keep counting in it).
    start = stored_start
    curr = tonumber(policy.extra[2]) or 0
    prev = tonumber(policy.extra[3]) or 0
  elseif stored_start == start - window then
    prev = tonumber(policy.extra[2]) or 0
  end
  -- Older than that: both counters are 0.
end

local window_us = window * 1000
local elapsed_us = now_us - start * 1000
if elapsed_us < 0 then
  elapsed_us = 0
elseif elapsed_us > window_us then
  elapsed_us = window_us
end
local weight = 1 - elapsed_us / window_us
local estimate = prev * weight + curr

-- A hair of tolerance so that float rounding never denies a permit that is due (counts are
-- integers: it can never let curr exceed max_permits).
local EPSILON = 1e-9

local function ceil_ms(us)
  if us <= 0 then
    return 0
  end
  return math.ceil(us / 1000)
end

local function remaining_of(est)
  local r = math.floor(max_permits - est + EPSILON)
  if r < 0 then
    return 0
  end
  return r
end

local function reset_after(c, p)
  if c > 0 then
    return ceil_ms(2 * window_us - elapsed_us)
  elseif p > 0 then
    return ceil_ms(window_us - elapsed_us)
  end
  return 0
end

if not policy.enabled then
  return {2, remaining_of(estimate), 0, reset_after(curr, prev), max_permits, version}
end

if estimate + permits <= max_permits + EPSILON then
  curr = curr + permits
  redis.call('HSET', key, 'sw_start', start, 'sw_curr', curr, 'sw_prev', prev)
  return {1, remaining_of(estimate + permits), 0, reset_after(curr, prev), max_permits, version}
end

-- Denied: nothing is written. When does estimate + permits fit?
local retry_us
if curr + permits <= max_permits and prev > 0 then
  -- Within this window, as the previous window's weight decays:
  -- prev * (1 - e / window) <= max_permits - curr - permits.
  retry_us = window_us * (1 - (max_permits - curr - permits) / prev) - elapsed_us
else
  -- Not before the next window, where prev' = curr, curr' = 0:
  -- curr * (1 - e' / window) <= max_permits - permits.
  retry_us = window_us - elapsed_us
  if curr > 0 then
    local e = window_us * (1 - (max_permits - permits) / curr)
    if e > 0 then
      retry_us = retry_us + e
    end
  end
end
return {-1, remaining_of(estimate), ceil_ms(retry_us), reset_after(curr, prev), max_permits,
  version}
