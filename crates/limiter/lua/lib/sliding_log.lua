-- The sliding log's decision, on a sorted set of granted permits: the global script's
-- <prefix>:{<policy>}:log or a keyed bucket key; with one acquire of each kind around it,
-- shared by those scripts and the batch script. Loaded ahead of them (after
-- lib/acquire_gate.lua); it only defines functions.
--
-- sliding_log_decide(log, max_permits, window, now_us, permits, request_id, enabled)
--   log  the sorted set: one member per granted permit, "<now_us>:<request id>:<i>" (i =
--        1..permits), score = Redis time of the grant in microseconds. Unique even for
--        grants in the same microsecond (bare timestamps as members would collapse
--        concurrent grants into one and under-count); a denial adds nothing (counting
--        rejected attempts too would lock a client that keeps retrying out for ever).
--        Entries that left the window are removed first, so the set never holds more than
--        max_permits members, and it expires with its newest entry.
-- Returns {code, remaining, retry_after_ms, reset_after_ms} (code 1 granted, -1 denied,
-- 2 unenforced: read only, the log is not trimmed).
local function sliding_log_decide(log, max_permits, window, now_us, permits, request_id,
    enabled)
  local window_us = window * 1000
  -- The window is (now - window, now]: an entry scored now - window has left it.
  local oldest_kept = now_us - window_us

  local function ms_from_now(score)
    local ms = math.ceil((tonumber(score) + window_us - now_us) / 1000)
    if ms < 0 then
      return 0
    end
    return ms
  end

  local function reset_after()
    local newest = redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')
    if newest[2] then
      return ms_from_now(newest[2])
    end
    return 0
  end

  if not enabled then
    local count = redis.call('ZCOUNT', log, '(' .. string.format('%d', oldest_kept), '+inf')
    return {REPLY.UNENFORCED, math.max(max_permits - count, 0), 0, reset_after()}
  end

  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', oldest_kept))
  local count = redis.call('ZCARD', log)

  if count + permits <= max_permits then
    local stamp = string.format('%d', now_us)
    -- ZADD in batches: unpack() of a huge table would overflow Lua's C stack.
    local i = 1
    while i <= permits do
      local args = {}
      local last = math.min(i + 499, permits)
      for j = i, last do
        args[#args + 1] = stamp
        args[#args + 1] = stamp .. ':' .. request_id .. ':' .. j
      end
      redis.call('ZADD', log, unpack(args))
      i = last + 1
    end
    -- The newest entry, this one, leaves the window in window_ms (+1: PEXPIRE counts from
    -- the start of the script, a hair before now_us).
    redis.call('PEXPIRE', log, window + 1)
    count = count + permits
    return {REPLY.GRANTED, max_permits - count, 0, window}
  end

  -- Denied: nothing is added. Enough room comes when the (count + permits -
  -- max_permits)-th oldest grant leaves the window.
  local needed = count + permits - max_permits
  local retry = 0
  local nth = redis.call('ZRANGE', log, needed - 1, needed - 1, 'WITHSCORES')
  if nth[2] then
    retry = ms_from_now(nth[2])
  end
  return {REPLY.DENIED, math.max(max_permits - count, 0), retry, reset_after()}
end


-- One acquire of a global policy (sliding_log.lua documents its keys and replies):
-- sliding_log_global(key, log, permits, app, request_id, now_us).
local function sliding_log_global(key, log, permits, app, request_id, now_us)
  local refused, policy = acquire_gate(key, 'sliding_log', 'window_ms', {}, permits, app)
  if refused then
    return refused
  end
  local reply = sliding_log_decide(log, policy.max_permits, policy.param, now_us, permits,
    request_id or '', policy.enabled)
  return decided(reply, policy)
end

-- One acquire on a caller's log of a keyed policy (lib/keyed.lua calls it): the bucket is
-- the sorted set of grants itself; it expires with its newest entry.
local function sliding_log_keyed(bucket, permits, max_permits, window, enabled, request_id,
    now_us)
  return sliding_log_decide(bucket, max_permits, window, now_us, permits, request_id, enabled)
end

-- sliding_log_give(log, window, at_us, now_us, permits, request_id): removes `permits`
-- grants from the log: with a request id, exactly the members the grant of that id at
-- at_us added (an undone grant); without one (a refund), the newest entries still in the
-- window, never more than there are.
local function sliding_log_give(log, window, at_us, now_us, permits, request_id)
  if permits <= 0 then
    return
  end
  if request_id then
    local prefix = string.format('%d', at_us) .. ':' .. request_id .. ':'
    local i = 1
    -- ZREM in batches: unpack() of a huge table would overflow Lua's C stack.
    while i <= permits do
      local members = {}
      local last = math.min(i + 499, permits)
      for j = i, last do
        members[#members + 1] = prefix .. j
      end
      redis.call('ZREM', log, unpack(members))
      i = last + 1
    end
    return
  end
  redis.call('ZREMRANGEBYSCORE', log, '-inf', string.format('%d', now_us - window * 1000))
  redis.call('ZPOPMAX', log, permits)
end

-- sliding_log_give_back_global(key, log, permits, app, request_id, at_us, now_us): the
-- give-back of a global policy, after the checks of an acquire of one permit. Reply:
-- {code, remaining, 0, reset_after_ms, max_permits, version} after it.
local function sliding_log_give_back_global(key, log, permits, app, request_id, at_us, now_us)
  local refused, policy = give_back_gate(key, 'sliding_log', 'window_ms', {}, app)
  if refused then
    return refused
  end
  if policy.enabled then
    sliding_log_give(log, policy.param, at_us, now_us, permits, request_id)
  end
  local reply = sliding_log_decide(log, policy.max_permits, policy.param, now_us, 1, '', false)
  return given(reply, policy)
end

-- The give-back on a caller's log (lib/keyed.lua's keyed_give_back calls it).
local function sliding_log_give_back_keyed(bucket, permits, max_permits, window, request_id,
    at_us, now_us)
  sliding_log_give(bucket, window, at_us, now_us, permits, request_id)
  local reply = sliding_log_decide(bucket, max_permits, window, now_us, 1, '', false)
  reply[1] = REPLY.GRANTED
  return reply
end
