-- One acquire on a caller's bucket of a keyed (per_app or per_key) policy, whatever its
-- algorithm: shared by the keyed scripts (lua/keyed/) and the batch script
-- (acquire_batch.lua). A keyed policy has one bucket per caller, spread over a cluster's
-- masters by its own hash tag: its script cannot read the policy's hash, so the instance
-- passes the policy's config (from its snapshot of SQL, overrides applied) with every
-- call. Loaded ahead of them; it only defines functions.
--
-- keyed_acquire(decide, bucket, argv, a, now_us) reads the request's arguments from
-- argv[a] on:
--   argv[a]      permits asked for (integer >= 1)
--   argv[a + 1]  max_permits (integer >= 1)
--   argv[a + 2]  the algorithm's parameter: rate (permits per second, fractional, > 0), or
--                window_ms, or lease_ttl_ms (integers >= 1)
--   argv[a + 3]  the gate: "1" enforce; "2" shadow mode (a denial is answered
--                SHADOW_DENIED: granted, nothing consumed); "0" disabled (granted
--                UNENFORCED), which also reads a bucket's state without writing anything;
--                plus HELD_EXPIRY when the bucket's expiry may be held ahead
--                (keyed_store below: a token bucket's and GCRA's; the others have none to
--                hold)
--   argv[a + 4]  the policy's version (echoed in the reply)
--   argv[a + 5]  for sliding_log a request id unique to the call; for concurrency the lease
--                members' prefix "<app>|<lease id>|"; absent for the others
-- and decides with decide(bucket, permits, max_permits, param, enabled, extra, now_us,
-- hold), the algorithm's <algorithm>_keyed (lua/lib/), which answers {code, remaining,
-- retry_after_ms, reset_after_ms}.
--
-- keyed_gate(number) -> the gate (0, 1 or 2) and whether the expiry may be held.
--
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted; -1 denied (nothing consumed); 2 granted unenforced (nothing written);
--        -3 permits not a whole number from 1 to max_permits.
-- Every bucket key carries a TTL: it goes once idle long enough to be full (or empty)
-- again, so Redis holds the callers active now, not every caller ever seen.

-- keyed_store(key, reset_after_ms, now, hold, held_until, exact_format, held_format, ...)
-- writes a caller's bucket whose expiry is the time until it is full again (a token
-- bucket's, GCRA's): its state `...` packed, or the key deleted when the bucket is full
-- again at once (nothing worth keeping). `now` is the decision's ms on Redis' clock.
--   Setting a key's expiry costs Redis about as much again as the write (it moves the key
--   in Redis' table of expiries), so with `hold` the expiry is held ahead: set to twice
--   the time until the bucket is full again, the ms until which it holds stored first
--   (held_format: a double, then the state), and the writes after it that need no later
--   expiry leave it where it is (KEEPTTL). A bucket then lives at most twice as long after
--   its last acquire, and never expires before it is full. Without `hold`
--   (RATEKEEPER_KEYED_EXPIRY=exact, while versions before held expiries run: they read
--   only exact_format) the exact expiry is set at every write, as they set it.
--   held_until: what the bucket's stored state held (nil: none, or not held).
local function keyed_store(key, reset_after_ms, now, hold, held_until, exact_format,
    held_format, ...)
  if reset_after_ms <= 0 then
    redis.call('DEL', key)
  elseif not hold then
    redis.call('SET', key, struct.pack(exact_format, ...), 'PX',
      string.format('%d', reset_after_ms + 1))
  elseif held_until and held_until >= now + reset_after_ms + 1 then
    redis.call('SET', key, struct.pack(held_format, held_until, ...), 'KEEPTTL')
  else
    -- Recorded 1 ms short of the expiry set: Redis counts it from its own clock at the
    -- SET, which may be a hair before this script's reading.
    local ttl = 2 * (reset_after_ms + 1)
    redis.call('SET', key, struct.pack(held_format, now + ttl - 1, ...), 'PX',
      string.format('%d', ttl))
  end
end

-- The -3 reply when `permits` cannot be asked of a bucket of max_permits, else nil.
local function keyed_refusal(permits, max_permits, version)
  if not permits or permits < 1 or permits > max_permits or permits ~= math.floor(permits) then
    return {REPLY.PERMITS_REFUSED, 0, 0, 0, max_permits, version}
  end
  return nil
end

local function keyed_gate(number)
  if number >= HELD_EXPIRY then
    return number - HELD_EXPIRY, true
  end
  return number, false
end

local function keyed_acquire(decide, bucket, argv, a, now_us)
  local permits = tonumber(argv[a])
  local max_permits = tonumber(argv[a + 1])
  local version = tonumber(argv[a + 4]) or 0
  local refused = keyed_refusal(permits, max_permits, version)
  if refused then
    return refused
  end
  local gate, hold = keyed_gate(tonumber(argv[a + 3]))
  local reply = decide(bucket, permits, max_permits, tonumber(argv[a + 2]), gate ~= 0,
    argv[a + 5] or '', now_us, hold)
  if reply[1] == REPLY.DENIED and gate == 2 then
    reply[1] = REPLY.SHADOW_DENIED
  end
  reply[5] = max_permits
  reply[6] = version
  return reply
end

-- keyed_give_back(give, bucket, argv, a, id, at_us, now_us) gives back what an acquire with
-- the same arguments (argv[a] on, as keyed_acquire reads them) took: permits may be more
-- than max_permits (the state is capped), a disabled policy (gate "0") gets nothing back.
-- `give` is the algorithm's <algorithm>_give_back_keyed(bucket, permits, max_permits,
-- param, id, at_us, now_us) (lua/lib/), answering {code, remaining, 0, reset_after_ms}
-- as the bucket is after it; id and at_us say which grant is undone (nil and now_us: a
-- refund, of the newest grants). Reply: as keyed_acquire's.
local function keyed_give_back(give, bucket, argv, a, id, at_us, now_us)
  local permits = tonumber(argv[a])
  local max_permits = tonumber(argv[a + 1])
  local version = tonumber(argv[a + 4]) or 0
  if not permits or permits < 1 or permits ~= math.floor(permits) then
    return {REPLY.PERMITS_REFUSED, 0, 0, 0, max_permits, version}
  end
  local enabled = keyed_gate(tonumber(argv[a + 3])) ~= 0
  if not enabled then
    permits = 0
  end
  local reply = give(bucket, permits, max_permits, tonumber(argv[a + 2]), id, at_us, now_us)
  if reply[1] == REPLY.GRANTED and not enabled then
    reply[1] = REPLY.UNENFORCED
  end
  reply[5] = max_permits
  reply[6] = version
  return reply
end
