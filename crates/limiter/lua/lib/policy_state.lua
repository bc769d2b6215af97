-- policy_state(key, tb_key, fw_key, log_key, leases_key, now_us, tb_state): the live state of a
-- policy of any algorithm, as it stands at now_us (Redis' clock, whole microseconds), without
-- writing anything. Shared by policy_state.lua (one policy) and policies_live.lua (a page of them).
--
-- key         the policy's hash, <prefix>:{<policy name>}
-- tb_key      the token bucket's state, <prefix>:{<policy name>}:tb (lib/
--             token_bucket_global.lua; the hash's curr_permits and last_mill_second
--             until the state moves there)
-- fw_key      the fixed window's counter, <prefix>:{<policy name>}:fw
-- log_key     the sliding log, <prefix>:{<policy name>}:log
-- leases_key  the leases, <prefix>:{<policy name>}:leases
-- (the same keys the acquire scripts take; sliding_window and gcra keep their state in the
-- hash.)
-- tb_state    tb_key's value when the caller has read it already (false: no such key), or nil
--
-- Reply: {} when the policy is not in Redis (no max_permits), is keyed (its callers each
-- have a bucket: lua/keyed/ reads one), or lacks what its algorithm
-- needs (rate > 0 for token_bucket and gcra, window_ms for the windowed ones, lease_ttl_ms
-- for concurrency: the acquire scripts answer "no such policy" then too). Else
--   {current_permits, max_permits, rate, version, updated_ms, full_in_ms, algorithm_index}
--   current_permits  string ("%.17g", may be fractional): permits an acquire could take now
--                    (an acquire of n is granted when n <= current_permits, give or take
--                    float rounding). token_bucket: the tokens refilled to now;
--                    fixed_window: max - the current window's count; sliding_log: max - the
--                    grants within the window; sliding_window: max - the estimate (at
--                    least 0; fractional); concurrency: max - the unexpired leases; gcra:
--                    the burst left, floor((max * T - (tat - now)) / T) in [0, max] with
--                    T = 1000 / rate ms.
--   max_permits      integer.
--   rate             string, as stored, for token_bucket and gcra; "0" for the others.
--   version          integer (0 if missing).
--   updated_ms       Unix ms of the last state write, 0 when none is known.
--                    token_bucket: the last grant (last_mill_second); sliding_log: the
--                    newest grant in the log; fixed_window: the start of the window of the
--                    live counter (the last grant was in that window); sliding_window: the
--                    start of the window of the last grant (sw_start); concurrency: the
--                    latest lease's expiry - lease_ttl_ms, i.e. its acquire (exact unless
--                    lease_ttl_ms changed since); gcra: 0 (it stores no time of write).
--   full_in_ms       ms until current_permits is back at max_permits if nothing more is
--                    taken; 0 when it is there. token_bucket: (max - tokens) * 1000 / rate;
--                    fixed_window: to the next window if anything of this one is used;
--                    sliding_log: until the newest grant leaves the window; sliding_window:
--                    until the estimate reaches 0; concurrency: until the last unexpired
--                    lease expires (a release frees it sooner); gcra: max(0, tat - now).
--                    Rounded up to whole ms.
--   algorithm_index  the algorithm's number in ALGORITHM_INDEX (as in the acquire
--                    scripts' -4 reply); 0 an algorithm this script does not know: then
--                    only max_permits, rate (as stored, "0" if none) and version mean
--                    anything, and the reply says current_permits = max_permits,
--                    updated_ms = full_in_ms = 0.
--
-- ALGORITHM_INDEX (algorithm name -> number) is defined ahead of this script when it is
-- loaded (crates/limiter/src/client/scripts.rs, from the Rust side's Algorithm::index).
--
-- token_bucket_live(tokens, last, max_permits, rate, version, now_us): policy_state's reply
-- for a global token bucket whose state is `tokens` at `last` (ms; both nil: never used,
-- full), with the configuration max_permits, rate (a string, as stored or passed) and
-- version. policies_live.lua calls it directly when the configuration passed in is the one
-- the state key was last decided with, and need not read the hash.

-- Times in replies are capped at 10^15 ms (some 31,700 years): a slow rate with a large
-- capacity could otherwise yield more ms than an integer reply holds.
local MAX_MS = 1e15
local function ceil_ms(ms)
  if ms <= 0 then
    return 0
  end
  return math.min(math.ceil(ms), MAX_MS)
end

-- The reply, with current clamped to [0, max_permits].
local function live_reply(current, max_permits, rate, version, updated, full_in, index)
  if current < 0 then
    current = 0
  elseif current > max_permits then
    current = max_permits
  end
  if updated < 0 then
    updated = 0
  end
  -- %.17g keeps every bit of a double; Redis' own conversion would round to 14 digits.
  return {string.format('%.17g', current), max_permits, rate, version, math.floor(updated),
    full_in, index}
end

local function token_bucket_live(tokens, last, max_permits, rate_text, version, now_us)
  local index = ALGORITHM_INDEX['token_bucket']
  if not tokens or not last then
    return live_reply(max_permits, max_permits, rate_text, version, 0, 0, index)
  end
  local rate = tonumber(rate_text)
  local now = now_us / 1000
  -- As in token_bucket.lua: a clock that went backwards (failover) refills nothing.
  if now > last then
    tokens = tokens + (now - last) * rate / 1000
  end
  if tokens > max_permits then
    tokens = max_permits
  end
  return live_reply(tokens, max_permits, rate_text, version, last,
    ceil_ms((max_permits - tokens) * 1000 / rate), index)
end

local function policy_state(key, tb_key, fw_key, log_key, leases_key, now_us, tb_state)
  local h = redis.call('HMGET', key, 'max_permits', 'rate', 'version', 'algorithm', 'window_ms',
    'lease_ttl_ms', 'curr_permits', 'last_mill_second', 'tat', 'sw_start', 'sw_curr', 'sw_prev',
    'scope')
  local max_permits = tonumber(h[1])
  -- A keyed policy (field scope) has no one state: each caller's bucket has its own.
  if not max_permits or h[13] then
    return {}
  end
  local version = tonumber(h[3]) or 0

  local algorithm = h[4] or 'token_bucket'
  local index = ALGORITHM_INDEX[algorithm] or 0

  local function fmt(x)
    return string.format('%.17g', x)
  end

  local function reply(current, rate, updated, full_in)
    return live_reply(current, max_permits, rate, version, updated, full_in, index)
  end

  if index == 0 then
    return reply(max_permits, h[2] or '0', 0, 0)
  end

  -- Redis time in ms with the µs kept.
  local now = now_us / 1000

  if algorithm == 'token_bucket' or algorithm == 'gcra' then
    local rate = tonumber(h[2])
    if not rate or rate <= 0 then
      return {}
    end

    if algorithm == 'token_bucket' then
      -- As in token_bucket.lua: a bucket never used is full; its state in the state key,
      -- or in the hash until it moves there.
      local tokens = tonumber(h[7])
      local last = tonumber(h[8])
      local raw = tb_state
      if raw == nil then
        raw = redis.call('GET', tb_key)
      end
      if raw and #raw == 32 then
        tokens, last = struct.unpack('<d<d', raw)
      end
      return token_bucket_live(tokens, last, max_permits, h[2], version, now_us)
    end

    -- gcra, as gcra.lua computes its `remaining`: a tat in the past is a full burst.
    local T = 1000 / rate
    local tat = tonumber(h[9])
    if not tat or tat < now then
      tat = now
    end
    local EPSILON = 1e-9
    local burst = math.floor((max_permits * T - (tat - now)) / T + EPSILON)
    return reply(burst, h[2], 0, ceil_ms(tat - now))
  end

  if algorithm == 'concurrency' then
    local ttl = tonumber(h[6])
    if not ttl or ttl < 1 then
      return {}
    end
    -- A lease expires at its score (ms): one scored now or earlier is free already, whether
    -- reclaimed yet or not.
    local held = redis.call('ZCOUNT', leases_key, '(' .. fmt(now), '+inf')
    local updated = 0
    local full_in = 0
    local latest = redis.call('ZRANGE', leases_key, -1, -1, 'WITHSCORES')
    if latest[2] then
      local expiry = tonumber(latest[2])
      updated = expiry - ttl
      full_in = ceil_ms(expiry - now)
    end
    return reply(max_permits - held, '0', updated, full_in)
  end

  -- The windowed algorithms.
  local window = tonumber(h[5])
  if not window or window < 1 then
    return {}
  end
  local window_us = window * 1000
  -- Windows aligned to multiples of window_ms, as fixed_window.lua and sliding_window.lua.
  local now_ms = math.floor(now_us / 1000)
  local start = now_ms - now_ms % window

  if algorithm == 'fixed_window' then
    local c = redis.call('HMGET', fw_key, 'start', 'count')
    local stored_start = tonumber(c[1])
    local count = 0
    local updated = 0
    if stored_start and stored_start >= start then
      -- The current window (or, after a clock that went back, a later one). An older
      -- window's counter counts for nothing.
      start = stored_start
      count = tonumber(c[2]) or 0
      updated = stored_start
    end
    local full_in = 0
    if count > 0 then
      full_in = ceil_ms(((start + window) * 1000 - now_us) / 1000)
    end
    return reply(max_permits - count, '0', updated, full_in)
  end

  if algorithm == 'sliding_log' then
    -- The window is (now - window, now]: an entry scored now - window has left it.
    local oldest_kept = now_us - window_us
    local count = redis.call('ZCOUNT', log_key, '(' .. string.format('%d', oldest_kept), '+inf')
    local updated = 0
    local full_in = 0
    local newest = redis.call('ZRANGE', log_key, -1, -1, 'WITHSCORES')
    if newest[2] then
      local score = tonumber(newest[2])
      updated = score / 1000
      full_in = ceil_ms((score + window_us - now_us) / 1000)
    end
    return reply(max_permits - count, '0', updated, full_in)
  end

  -- sliding_window, as sliding_window.lua computes its estimate.
  local stored_start = tonumber(h[10])
  local curr = 0
  local prev = 0
  if stored_start then
    if stored_start >= start then
      start = stored_start
      curr = tonumber(h[11]) or 0
      prev = tonumber(h[12]) or 0
    elseif stored_start == start - window then
      prev = tonumber(h[11]) or 0
    end
  end
  local elapsed_us = now_us - start * 1000
  if elapsed_us < 0 then
    elapsed_us = 0
  elseif elapsed_us > window_us then
    elapsed_us = window_us
  end
  local estimate = prev * (1 - elapsed_us / window_us) + curr
  local full_in = 0
  if curr > 0 then
    full_in = ceil_ms((2 * window_us - elapsed_us) / 1000)
  elseif prev > 0 then
    full_in = ceil_ms((window_us - elapsed_us) / 1000)
  end
  return reply(max_permits - estimate, '0', stored_start or 0, full_in)
end
