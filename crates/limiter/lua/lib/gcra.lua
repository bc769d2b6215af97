-- GCRA's decision, shared by the global script (tat in the policy's hash), the keyed one
-- (tat in a bucket key of its own) and the batch script: the decision, and one acquire of
-- each kind around it. Loaded ahead of them (after lib/acquire_gate.lua); it only defines
-- functions.
--
-- With the emission interval T = 1000 / rate ms and the burst tolerance
-- tau = (max_permits - 1) * T, a request of n permits is granted when
--   new_tat - now <= tau + T, where new_tat = max(tat, now) + n * T
-- (for n = 1: tat - now <= tau, the standard test), and then tat = new_tat. A fresh or
-- long idle bucket allows max_permits at once, like a full token bucket.
--
-- gcra_decide(tat, max_permits, rate, now, permits, enabled)
--   tat  the stored theoretical arrival time in ms (fractional), nil for none
-- Returns {code, remaining, retry_after_ms, reset_after_ms} (code 1 granted, -1 denied,
-- 2 unenforced) and the new tat to store, or nil when nothing is to be written.
local function gcra_decide(tat, max_permits, rate, now, permits, enabled)
  local T = 1000 / rate
  local limit = max_permits * T -- tau + T
  -- A tat in the past is a full burst: count from now. A tat in the future (a clock that
  -- went back, or permits taken) is kept as it is.
  if not tat or tat < now then
    tat = now
  end
  -- A hair of tolerance so that float rounding never denies a permit that is due.
  local EPSILON = 1e-9

  -- Times in replies are capped at 10^15 ms (some 31,700 years): a slow rate with a large
  -- capacity could otherwise yield more ms than an integer reply holds.
  local function ceil_ms(ms)
    if ms <= 0 then
      return 0
    end
    return math.min(math.ceil(ms), 1e15)
  end

  local function remaining_at(backlog)
    local r = math.floor((limit - backlog) / T + EPSILON)
    if r < 0 then
      return 0
    end
    if r > max_permits then
      return max_permits
    end
    return r
  end

  -- Compared as durations from now, not as absolute times: at the largest capacities with
  -- the slowest rates, now + permits * T is so large that adding now loses more than the
  -- tolerance, and a full burst would be refused.
  local backlog = tat - now
  if not enabled then
    return {REPLY.UNENFORCED, remaining_at(backlog), 0, ceil_ms(backlog)}, nil
  end
  local needed = backlog + permits * T
  if needed <= limit + EPSILON * T then
    return {REPLY.GRANTED, remaining_at(needed), 0, ceil_ms(needed)}, tat + permits * T
  end
  -- Denied: nothing is written (the tat is a function of the grants only).
  return {REPLY.DENIED, remaining_at(backlog), ceil_ms(needed - limit), ceil_ms(backlog)}, nil
end


-- One acquire of a global policy (gcra.lua documents its keys and replies):
-- gcra_global(key, _, permits, app, _, now_us).
local function gcra_global(key, _, permits, app, _, now_us)
  local refused, policy = acquire_gate(key, 'gcra', 'rate', {'tat'}, permits, app)
  if refused then
    return refused
  end
  local reply, tat = gcra_decide(tonumber(policy.extra[1]), policy.max_permits, policy.param,
    now_us / 1000, permits, policy.enabled)
  if tat then
    -- %.17g keeps every bit of a double; Redis' own conversion would round to 14 digits.
    redis.call('HSET', key, 'tat', string.format('%.17g', tat))
  end
  return decided(reply, policy)
end

-- A caller's bucket of a keyed policy. State: one little-endian double, the tat (8
-- bytes), after the ms until which its expiry is held when it is (16 bytes:
-- lib/keyed.lua's keyed_store); the key expires at the earliest when the tat is reached.
-- gcra_keyed_load(raw), the GET reply -> tat, held_until (nil: none).
local function gcra_keyed_load(raw)
  if raw then
    local size = #raw
    if size == 16 then
      local held_until, tat = struct.unpack('<d<d', raw)
      return tat, held_until
    elseif size == 8 then
      return struct.unpack('<d', raw)
    end
  end
  return nil, nil
end

-- One acquire on a caller's bucket (lib/keyed.lua calls it).
local function gcra_keyed(bucket, permits, max_permits, rate, enabled, _, now_us, hold)
  local now = now_us / 1000
  local tat, held_until = gcra_keyed_load(redis.call('GET', bucket))
  local reply, new_tat = gcra_decide(tat, max_permits, rate, now, permits, enabled)
  if new_tat then
    keyed_store(bucket, reply[4], now, hold, held_until, '<d', '<d<d', new_tat)
  end
  return reply
end

-- gcra_give(tat, rate, now, permits): the tat after giving `permits` back: moved back by
-- permits * T, never before now (an earlier tat would be a burst above max_permits).
-- The exact inverse of a grant at the same instant. Returns the tat, nil when there is
-- none (nothing taken: nothing to give back).
local function gcra_give(tat, rate, now, permits)
  if not tat then
    return nil
  end
  local back = tat - permits * 1000 / rate
  if back < now then
    back = now
  end
  return back
end

-- gcra_give_back_global(key, _, permits, app, _, _, now_us): the give-back of a global
-- policy, after the checks of an acquire of one permit. Reply: {code, remaining, 0,
-- reset_after_ms, max_permits, version} after it.
local function gcra_give_back_global(key, _, permits, app, _, _, now_us)
  local refused, policy = give_back_gate(key, 'gcra', 'rate', {'tat'}, app)
  if refused then
    return refused
  end
  local now = now_us / 1000
  local tat = tonumber(policy.extra[1])
  if policy.enabled and permits > 0 then
    tat = gcra_give(tat, policy.param, now, permits)
    if tat then
      redis.call('HSET', key, 'tat', string.format('%.17g', tat))
    end
  end
  local reply = gcra_decide(tat, policy.max_permits, policy.param, now, 1, false)
  return given(reply, policy)
end

-- The give-back on a caller's bucket (lib/keyed.lua's keyed_give_back calls it): the key
-- goes when the tat is reached, as after a grant (its exact expiry set: a give-back is
-- rare, and any version reads what it writes).
local function gcra_give_back_keyed(bucket, permits, max_permits, rate, _, _, now_us)
  local now = now_us / 1000
  local tat = gcra_keyed_load(redis.call('GET', bucket))
  if permits > 0 then
    tat = gcra_give(tat, rate, now, permits)
  end
  local reply = gcra_decide(tat, max_permits, rate, now, 1, false)
  if tat and permits > 0 then
    keyed_store(bucket, reply[4], now, false, nil, '<d', '<d<d', tat)
  end
  reply[1] = REPLY.GRANTED
  return reply
end
