-- The sliding window's decision (the two-counter approximation), shared by the global
-- script (state in the policy's hash), the keyed one (a bucket key of its own) and the
-- batch script: the decision, and one acquire of each kind around it. Loaded ahead of
-- them (after lib/acquire_gate.lua); it only defines functions.
--
-- With windows aligned to multiples of window_ms on Redis time and `elapsed` the time
-- since the current window started:
--   estimate = prev * (1 - elapsed / window_ms) + curr
-- and a request is granted when estimate + permits <= max_permits.
--
-- sliding_window_decide(stored_start, stored_curr, stored_prev, max_permits, window,
--                       now_us, permits, enabled)
--   the stored state: the start of the window last written (ms), the permits granted in
--   it and in the window before it; nil for none
-- Returns {code, remaining, retry_after_ms, reset_after_ms} (code 1 granted, -1 denied,
-- 2 unenforced) and the state to store {start, curr, prev}, or nil.
local function sliding_window_decide(stored_start, stored_curr, stored_prev, max_permits,
    window, now_us, permits, enabled)
  local now_ms = math.floor(now_us / 1000)
  local start = now_ms - now_ms % window
  local curr = 0
  local prev = 0
  if stored_start then
    if stored_start >= start then
      -- This window (or, after a clock that went back, a later one: keep counting in it).
      start = stored_start
      curr = stored_curr or 0
      prev = stored_prev or 0
    elseif stored_start == start - window then
      prev = stored_curr or 0
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

  -- A hair of tolerance so that float rounding never denies a permit that is due (counts
  -- are integers: it can never let curr exceed max_permits).
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

  if not enabled then
    return {REPLY.UNENFORCED, remaining_of(estimate), 0, reset_after(curr, prev)}, nil
  end
  if estimate + permits <= max_permits + EPSILON then
    curr = curr + permits
    return {REPLY.GRANTED, remaining_of(estimate + permits), 0, reset_after(curr, prev)},
      {start, curr, prev}
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
  return {REPLY.DENIED, remaining_of(estimate), ceil_ms(retry_us), reset_after(curr, prev)}, nil
end


-- One acquire of a global policy (sliding_window.lua documents its keys and replies):
-- sliding_window_global(key, _, permits, app, _, now_us).
local function sliding_window_global(key, _, permits, app, _, now_us)
  local refused, policy = acquire_gate(key, 'sliding_window', 'window_ms',
    {'sw_start', 'sw_curr', 'sw_prev'}, permits, app)
  if refused then
    return refused
  end
  local reply, state = sliding_window_decide(tonumber(policy.extra[1]),
    tonumber(policy.extra[2]), tonumber(policy.extra[3]), policy.max_permits, policy.param,
    now_us, permits, policy.enabled)
  if state then
    redis.call('HSET', key, 'sw_start', state[1], 'sw_curr', state[2], 'sw_prev', state[3])
  end
  return decided(reply, policy)
end

-- One acquire on a caller's counters of a keyed policy (lib/keyed.lua calls it). State: a
-- string of three little-endian doubles (window start in ms, this window's count, the
-- previous window's), expiring after two windows (when both counts are 0 anyway).
local function sliding_window_keyed(bucket, permits, max_permits, window, enabled, _, now_us)
  local raw = redis.call('GET', bucket)
  local start, curr, prev
  if raw and #raw == 24 then
    start, curr, prev = struct.unpack('<d<d<d', raw)
  end
  local reply, state = sliding_window_decide(start, curr, prev, max_permits, window, now_us,
    permits, enabled)
  if state then
    redis.call('SET', bucket, struct.pack('<d<d<d', state[1], state[2], state[3]), 'PX',
      2 * window + 1)
  end
  return reply
end

-- sliding_window_give(stored_start, curr, prev, window, at_us, permits): the counts after
-- giving back `permits` granted at at_us: the grant's window's count lowered, never below
-- 0, whether it is the current one or, since then, the previous one; unchanged when it is
-- older (its weight is 0). Returns curr, prev and whether they changed.
local function sliding_window_give(stored_start, curr, prev, window, at_us, permits)
  local at_ms = math.floor(at_us / 1000)
  local start = at_ms - at_ms % window
  if permits <= 0 or not stored_start then
    return curr, prev, false
  end
  if stored_start == start then
    return math.max((curr or 0) - permits, 0), prev, true
  end
  if stored_start == start + window then
    return curr, math.max((prev or 0) - permits, 0), true
  end
  return curr, prev, false
end

-- sliding_window_give_back_global(key, _, permits, app, _, at_us, now_us): the give-back of
-- a global policy, after the checks of an acquire of one permit. Reply: {code, remaining,
-- 0, reset_after_ms, max_permits, version} after it.
local function sliding_window_give_back_global(key, _, permits, app, _, at_us, now_us)
  local refused, policy = give_back_gate(key, 'sliding_window', 'window_ms',
    {'sw_start', 'sw_curr', 'sw_prev'}, app)
  if refused then
    return refused
  end
  local start = tonumber(policy.extra[1])
  local curr, prev, changed = sliding_window_give(start, tonumber(policy.extra[2]),
    tonumber(policy.extra[3]), policy.param, at_us, policy.enabled and permits or 0)
  if changed then
    redis.call('HSET', key, 'sw_curr', curr or 0, 'sw_prev', prev or 0)
  end
  local reply = sliding_window_decide(start, curr, prev, policy.max_permits, policy.param,
    now_us, 1, false)
  return given(reply, policy)
end

-- The give-back on a caller's counters (lib/keyed.lua's keyed_give_back calls it); the key
-- keeps its expiry.
local function sliding_window_give_back_keyed(bucket, permits, max_permits, window, _, at_us,
    now_us)
  local raw = redis.call('GET', bucket)
  local start, curr, prev
  if raw and #raw == 24 then
    start, curr, prev = struct.unpack('<d<d<d', raw)
  end
  local changed
  curr, prev, changed = sliding_window_give(start, curr, prev, window, at_us, permits)
  if changed then
    redis.call('SET', bucket, struct.pack('<d<d<d', start, curr, prev), 'KEEPTTL')
  end
  local reply = sliding_window_decide(start, curr, prev, max_permits, window, now_us, 1, false)
  reply[1] = REPLY.GRANTED
  return reply
end
