-- Concurrency leases: taking and giving back, on a sorted set of the leases held (the
-- global script's <prefix>:{<policy>}:leases or a keyed bucket key), and one acquire of
-- each kind around them. Loaded ahead of the concurrency scripts and the batch script
-- (after lib/acquire_gate.lua where they acquire); it only defines functions.
--
-- The set holds one member per permit held, "<app>|<lease id>|<i>" (i = 1..permits),
-- score = its expiry in ms on Redis' clock. Expired members are reclaimed on every call,
-- so a client that crashes while holding permits cannot hold them for ever. The set
-- expires with its last lease. Lease ids must be unique: acquiring again with one still
-- held renews its members, counting them anew (conservative: never more than max held).

-- concurrency_acquire(leases, max_permits, ttl, now, permits, member_prefix, enabled)
--   member_prefix "<app>|<lease id>|"; ttl the lease's life in ms; now in ms (fractional)
-- Returns {code, remaining, retry_after_ms, reset_after_ms} (code 1 granted: the lease is
-- held; -1 denied: nothing taken; 2 unenforced: read only, no lease recorded). retry:
-- time until enough leases expire (an upper bound: a release frees them sooner); reset:
-- time until the last lease held expires.
local function concurrency_acquire(leases, max_permits, ttl, now, permits, member_prefix,
    enabled)
  local now_s = string.format('%.17g', now)

  local function ms_until(score)
    local ms = math.ceil(tonumber(score) - now)
    if ms < 0 then
      return 0
    end
    return ms
  end

  local function reset_after()
    local last = redis.call('ZRANGE', leases, -1, -1, 'WITHSCORES')
    if last[2] then
      return ms_until(last[2])
    end
    return 0
  end

  if not enabled then
    -- Read only: expired leases are only counted out, not removed.
    local held = redis.call('ZCOUNT', leases, '(' .. now_s, '+inf')
    return {REPLY.UNENFORCED, math.max(max_permits - held, 0), 0, reset_after()}
  end

  -- A lease expires at its score: reclaim every one whose time has come.
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now_s)
  local held = redis.call('ZCARD', leases)

  if held + permits <= max_permits then
    local expiry = string.format('%.17g', now + ttl)
    local i = 1
    -- ZADD in batches: unpack() of a huge table would overflow Lua's C stack.
    while i <= permits do
      local args = {}
      local last = math.min(i + 499, permits)
      for j = i, last do
        args[#args + 1] = expiry
        args[#args + 1] = member_prefix .. j
      end
      redis.call('ZADD', leases, unpack(args))
      i = last + 1
    end
    held = held + permits
    -- The set lives as long as its last lease (the ttl may have been lowered since older
    -- leases were taken, so ask the set rather than assume this one is the last).
    local reset = reset_after()
    redis.call('PEXPIRE', leases, reset + 1)
    return {REPLY.GRANTED, max_permits - held, 0, reset}
  end

  -- Denied: nothing taken. Room comes when the (held + permits - max_permits)-th
  -- soonest-expiring lease expires.
  local needed = held + permits - max_permits
  local retry = 0
  local nth = redis.call('ZRANGE', leases, needed - 1, needed - 1, 'WITHSCORES')
  if nth[2] then
    retry = ms_until(nth[2])
  end
  return {REPLY.DENIED, math.max(max_permits - held, 0), retry, reset_after()}
end

-- concurrency_release(leases, max_permits, now, member_prefix)
-- Gives back every permit of one lease. Returns {code, remaining, released,
-- reset_after_ms}: code 1 released, -5 no such lease held (unknown, expired, already
-- released, or another application's: members are prefixed by the app).
local function concurrency_release(leases, max_permits, now, member_prefix)
  -- An expired lease is reclaimed, never released: its permits were already free.
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', string.format('%.17g', now))
  -- The members of one lease are "<prefix>1" .. "<prefix><permits>", contiguous from 1:
  -- remove them in batches until a batch comes back short.
  local released = 0
  local i = 1
  while true do
    local members = {}
    for j = i, i + 99 do
      members[#members + 1] = member_prefix .. j
    end
    local n = redis.call('ZREM', leases, unpack(members))
    released = released + n
    if n < #members then
      break
    end
    i = i + 100
  end
  local held = redis.call('ZCARD', leases)
  local reset = 0
  local last = redis.call('ZRANGE', leases, -1, -1, 'WITHSCORES')
  if last[2] then
    reset = math.max(math.ceil(tonumber(last[2]) - now), 0)
  end
  local code = REPLY.GRANTED
  if released == 0 then
    code = REPLY.NOT_HELD
  end
  return {code, math.max(max_permits - held, 0), released, reset}
end


-- One acquire of a global policy (concurrency_acquire.lua documents its keys and
-- replies): concurrency_global(key, leases, permits, app, lease_id, now_us).
local function concurrency_global(key, leases, permits, app, lease_id, now_us)
  local refused, policy = acquire_gate(key, 'concurrency', 'lease_ttl_ms', {}, permits, app)
  if refused then
    return refused
  end
  local reply = concurrency_acquire(leases, policy.max_permits, policy.param, now_us / 1000,
    permits, app .. '|' .. (lease_id or '') .. '|', policy.enabled)
  return decided(reply, policy)
end

-- One acquire on a caller's leases of a keyed policy (lib/keyed.lua calls it): the bucket
-- is the sorted set of leases itself; it expires with its last lease.
local function concurrency_keyed(bucket, permits, max_permits, ttl, enabled, member_prefix,
    now_us)
  return concurrency_acquire(bucket, max_permits, ttl, now_us / 1000, permits, member_prefix,
    enabled)
end

-- The give-back of a lease a grant just took (an all-or-nothing acquire undone): its
-- release. A refund is no give-back for leases (they are released): without a lease it
-- answers {WRONG_ALGORITHM, concurrency's number, ...}, which the instance reads as "this
-- policy keeps release".
-- concurrency_give_back_global(key, leases, permits, app, lease_id, at_us, now_us)
local function concurrency_give_back_global(key, leases, _, app, lease_id, _, now_us)
  local refused, policy = give_back_gate(key, 'concurrency', 'lease_ttl_ms', {}, app)
  if refused then
    return refused
  end
  if not lease_id then
    return {REPLY.WRONG_ALGORITHM, ALGORITHM_INDEX.concurrency, 0, 0, 0, policy.version}
  end
  local r = concurrency_release(leases, policy.max_permits, now_us / 1000,
    app .. '|' .. lease_id .. '|')
  return given({0, r[2], 0, r[4]}, policy)
end

-- The same on a caller's leases; member_prefix is "<app>|<lease id>|" as the acquire took it.
local function concurrency_give_back_keyed(bucket, _, max_permits, _, member_prefix, _, now_us)
  if not member_prefix then
    return {REPLY.WRONG_ALGORITHM, ALGORITHM_INDEX.concurrency, 0, 0}
  end
  local r = concurrency_release(bucket, max_permits, now_us / 1000, member_prefix)
  return {REPLY.GRANTED, r[2], 0, r[4]}
end
