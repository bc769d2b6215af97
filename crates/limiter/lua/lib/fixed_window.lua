-- The fixed window's decision, shared by the global script (a counter key beside the
-- policy's hash), the keyed one (a bucket key of its own) and the batch script: the
-- decision, and one acquire of each kind around it. Loaded ahead of them (after
-- lib/acquire_gate.lua); it only defines functions.
--
-- fixed_window_decide(stored_start, stored_count, max_permits, window, now_us, permits,
--                     enabled)
--   stored_start, stored_count  the stored counter (window start in ms, permits granted
--                 in it), nil for none; windows aligned to multiples of window (ms) on
--                 Redis time, now_us in whole microseconds
-- Returns {code, remaining, retry_after_ms, reset_after_ms} (code 1 granted, -1 denied,
-- 2 unenforced; retry and reset: time to the next window start, reset 0 when nothing of
-- this window is used), then the counter to store {start, count} or nil, and the ms until
-- the counter's window ends (its TTL, at least 1).
local function fixed_window_decide(stored_start, stored_count, max_permits, window, now_us,
    permits, enabled)
  local now_ms = math.floor(now_us / 1000)
  local start = now_ms - now_ms % window
  local count = 0
  if stored_start and stored_start >= start then
    -- The current window (or, after a clock that went back, a later one: keep counting in
    -- it rather than grant a fresh window twice). An older window's counter is ignored.
    start = stored_start
    count = stored_count or 0
  end
  local window_end_us = (start + window) * 1000
  local to_next = math.ceil((window_end_us - now_us) / 1000)
  if to_next < 0 then
    to_next = 0
  end
  local ttl = math.max(to_next, 1)

  if not enabled then
    local reset = 0
    if count > 0 then
      reset = to_next
    end
    return {REPLY.UNENFORCED, math.max(max_permits - count, 0), 0, reset}, nil, ttl
  end
  if count + permits <= max_permits then
    count = count + permits
    return {REPLY.GRANTED, max_permits - count, 0, to_next}, {start, count}, ttl
  end
  -- Denied: nothing is written; the counter of this window already carries its TTL.
  return {REPLY.DENIED, math.max(max_permits - count, 0), to_next, to_next}, nil, ttl
end


-- One acquire of a global policy (fixed_window.lua documents its keys and replies):
-- fixed_window_global(key, counter, permits, app, _, now_us), the counter being
-- <prefix>:{<policy name>}:fw.
local function fixed_window_global(key, counter, permits, app, _, now_us)
  local refused, policy = acquire_gate(key, 'fixed_window', 'window_ms', {}, permits, app)
  if refused then
    return refused
  end
  local c = redis.call('HMGET', counter, 'start', 'count')
  local reply, state, ttl = fixed_window_decide(tonumber(c[1]), tonumber(c[2]),
    policy.max_permits, policy.param, now_us, permits, policy.enabled)
  if state then
    redis.call('HSET', counter, 'start', state[1], 'count', state[2])
    -- Expire with the window: at least 1 ms ahead, since now < start + window.
    redis.call('PEXPIRE', counter, ttl)
  end
  return decided(reply, policy)
end

-- One acquire on a caller's counter of a keyed policy (lib/keyed.lua calls it). State: a
-- string of two little-endian doubles, the window's start (ms) and its count, written
-- only together with the expiry at the window's end.
local function fixed_window_keyed(bucket, permits, max_permits, window, enabled, _, now_us)
  local raw = redis.call('GET', bucket)
  local start, count
  if raw and #raw == 16 then
    start, count = struct.unpack('<d<d', raw)
  end
  local reply, state, ttl = fixed_window_decide(start, count, max_permits, window, now_us,
    permits, enabled)
  if state then
    redis.call('SET', bucket, struct.pack('<d<d', state[1], state[2]), 'PX', ttl)
  end
  return reply
end

-- fixed_window_give(stored_start, stored_count, window, at_us, permits): the count after
-- giving back `permits` granted at at_us: lowered, never below 0, while the counter is
-- still that grant's window; else unchanged (the window they counted in is over). Returns
-- the count and whether it changed.
local function fixed_window_give(stored_start, stored_count, window, at_us, permits)
  local at_ms = math.floor(at_us / 1000)
  if permits <= 0 or not stored_count or stored_start ~= at_ms - at_ms % window then
    return stored_count, false
  end
  return math.max(stored_count - permits, 0), true
end

-- fixed_window_give_back_global(key, counter, permits, app, _, at_us, now_us): the give-back
-- of a global policy, after the checks of an acquire of one permit; the counter keeps its
-- expiry. Reply: {code, remaining, 0, reset_after_ms, max_permits, version} after it.
local function fixed_window_give_back_global(key, counter, permits, app, _, at_us, now_us)
  local refused, policy = give_back_gate(key, 'fixed_window', 'window_ms', {}, app)
  if refused then
    return refused
  end
  local c = redis.call('HMGET', counter, 'start', 'count')
  local start = tonumber(c[1])
  local count, changed = fixed_window_give(start, tonumber(c[2]), policy.param, at_us,
    policy.enabled and permits or 0)
  if changed then
    redis.call('HSET', counter, 'count', count)
  end
  local reply = fixed_window_decide(start, count, policy.max_permits, policy.param, now_us, 1,
    false)
  return given(reply, policy)
end

-- The give-back on a caller's counter (lib/keyed.lua's keyed_give_back calls it); the key
-- keeps its expiry.
local function fixed_window_give_back_keyed(bucket, permits, max_permits, window, _, at_us,
    now_us)
  local raw = redis.call('GET', bucket)
  local start, count
  if raw and #raw == 16 then
    start, count = struct.unpack('<d<d', raw)
  end
  local changed
  count, changed = fixed_window_give(start, count, window, at_us, permits)
  if changed then
    redis.call('SET', bucket, struct.pack('<d<d', start, count), 'KEEPTTL')
  end
  local reply = fixed_window_decide(start, count, max_permits, window, now_us, 1, false)
  reply[1] = REPLY.GRANTED
  return reply
end
