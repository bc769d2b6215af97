-- The token bucket's decision, shared by the global script (state in the policy's hash),
-- the keyed one (state in a bucket key of its own) and the batch script. Loaded ahead of
-- them; it only defines functions.
--
-- token_bucket_decide(tokens, last, max_permits, rate, now, permits, enabled)
--   tokens, last  the stored state (permits left, fractional; ms of its last write,
--                 fractional), nil for a bucket never used: it starts full
--   rate          permits per second (fractional, > 0); now in ms on Redis' clock
-- Returns code, remaining, retry_after_ms, reset_after_ms, with code 1 granted, -1 denied
-- (nothing consumed), 2 granted unenforced (nothing consumed), then the state to store,
-- tokens and last, only when there is something to write (a denial writes nothing: refill
-- is a function of time). Several values rather than a table: the batch script decides
-- every request of a batch with it, and a table each would be garbage each.
-- Times in replies are capped at 10^15 ms (some 31,700 years): a slow rate with a large
-- capacity could otherwise yield more ms than an integer reply holds.
-- The math functions as locals: a global's lookup on every decision costs more than the
-- arithmetic around it.
local token_bucket_floor, token_bucket_ceil, token_bucket_min = math.floor, math.ceil, math.min

local function token_bucket_ms_until(amount, rate)
  if amount <= 0 then
    return 0
  end
  return token_bucket_min(token_bucket_ceil(amount * 1000 / rate), 1e15)
end

local function token_bucket_decide(tokens, last, max_permits, rate, now, permits, enabled)
  if not tokens or not last then
    tokens = max_permits
    last = now
  elseif now > last then
    -- Refill lazily, keeping the fraction: flooring it would lose the time between whole
    -- tokens at every call, so a slow rate polled often would refill slower than promised.
    tokens = tokens + (now - last) * rate / 1000
    last = now
  end
  -- A clock that went backwards (failover) refills nothing and keeps `last`; a lowered
  -- capacity clamps what was there, never refills.
  if tokens > max_permits then
    tokens = max_permits
  end

  if not enabled then
    return REPLY.UNENFORCED, token_bucket_floor(tokens), 0, token_bucket_ms_until(max_permits - tokens, rate)
  end
  -- A hair of tolerance so that float rounding never denies a permit that is due.
  local EPSILON = 1e-9
  if tokens + EPSILON >= permits then
    tokens = tokens - permits
    if tokens < 0 then
      tokens = 0
    end
    return REPLY.GRANTED, token_bucket_floor(tokens + EPSILON), 0,
      token_bucket_ms_until(max_permits - tokens, rate), tokens, last
  end
  return REPLY.DENIED, token_bucket_floor(tokens + EPSILON), token_bucket_ms_until(permits - tokens, rate),
    token_bucket_ms_until(max_permits - tokens, rate)
end

-- token_bucket_give(tokens, last, max_permits, rate, now, permits): the state after giving
-- `permits` back at `now`: refilled to now first, then never above max_permits (a bucket
-- never used is full: nothing to give back). The exact inverse of a grant at the same
-- instant. Returns tokens, last.
local function token_bucket_give(tokens, last, max_permits, rate, now, permits)
  if not tokens or not last then
    return max_permits, now
  end
  if now > last then
    tokens = tokens + (now - last) * rate / 1000
    last = now
  end
  return token_bucket_min(tokens + permits, max_permits), last
end
