-- The fixed window's decision, shared by the global script (a counter key beside the
-- policy's hash) and the keyed one (a bucket key of its own). Loaded ahead of them; it
-- only defines a function.
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
    return {2, math.max(max_permits - count, 0), 0, reset}, nil, ttl
  end
  if count + permits <= max_permits then
    count = count + permits
    return {1, max_permits - count, 0, to_next}, {start, count}, ttl
  end
  -- Denied: nothing is written; the counter of this window already carries its TTL.
  return {-1, math.max(max_permits - count, 0), to_next, to_next}, nil, ttl
end

