-- Many acquires in one call (src/decide/batch.rs sends the acquires that arrived while
-- the previous call was in flight), decided one after the other in arrival order, each
-- exactly as its single script would decide it at the same instant: every algorithm's
-- acquire, global and keyed, is the function its single script calls (lua/lib/, loaded
-- ahead of this), and all of them read the one clock reading of the batch.
--
-- ARGV     per entry, in order: its kind, its count, then as many arguments as the kind
--          takes:
--            kind  the algorithm's number in ALGORITHM_INDEX for a global policy, minus
--                  it for a caller's bucket of a keyed policy
--            count how many identical requests, one after the other, the entry stands for
--                  (1 for a sliding_log or concurrency request: each has its own id)
--            global: permits, app slug, and for sliding_log and concurrency the request
--                    or lease id; for the token bucket, the policy's configuration as this
--                    instance has it (max_permits, rate, gate, version, created_ms, move:
--                    lib/token_bucket_global.lua) (the single script's ARGV)
--            keyed:  permits, max_permits, param, gate, version, and for sliding_log
--                    and concurrency the request id or lease members' prefix (the keyed
--                    script's ARGV, lib/keyed.lua)
--          A token bucket's entry may come packed instead: its kind is BATCH_ARGS.packed
--          (minus it for a caller's bucket), and one argument follows, the count and its
--          numbers (PACKED_GLOBAL, PACKED_KEYED below; the server sends them so)
-- KEYS     per entry, in order: the policy's hash and, for a global token_bucket,
--          fixed_window, sliding_log or concurrency policy, its state key (the single
--          script's KEYS);
--          the caller's bucket for a keyed policy
--
-- Reply: one string, 48 bytes per request (count per entry), in order: its single script's
-- reply, the 6 integers each as 8 bytes little-endian (struct.pack's '<i8'). One string
-- rather than an array of integers: Redis builds either at about the same cost, but the
-- client reads one string at once where it parsed 6 integers per request, some 5% of the
-- server's CPU under load (src/client/scripts.rs decodes it).
--
-- The token bucket, the default and the most used, decides an entry's requests on one read
-- and one write: the server sends identical requests of a bucket as one entry with a count
-- (src/decide/batch_plan.rs), so a hot bucket costs one read and one write per batch, not
-- per request. An entry reads the bucket from Redis and writes it back before the next one
-- (as the single scripts do, one after the other), so no table is kept per bucket; a
-- bucket in several entries (other permits or app) is read again, and sees what those
-- before took. A global bucket whose state is in its state key, decided with the
-- configuration it was stored with, takes a path of locals alone; any other case goes the
-- way of the single script (lib/token_bucket_global.lua). The other algorithms read and
-- write their state per request, as their single scripts do.
local now_us = redis_now_us()
local now = now_us / 1000
local tonumber = tonumber -- a local: looked up for every argument
local pack = struct.pack
local unpack_packed = struct.unpack
local floor = math.floor
local REPLY_FORMAT = '<i8i8i8i8i8i8'
local TOKEN_BUCKET = ALGORITHM_INDEX.token_bucket
local SLIDING_LOG = ALGORITHM_INDEX.sliding_log
local CONCURRENCY = ALGORITHM_INDEX.concurrency
local DENIED, SHADOW_DENIED = REPLY.DENIED, REPLY.SHADOW_DENIED
local out = {}      -- the replies, a string each
local n = 0         -- replies in out
local a = 1         -- the entry's first argument (its kind)
local k = 1         -- the entry's first key
local args = #ARGV

-- Decides `count` requests of `permits` on a token bucket holding `tokens` (nil: never
-- used, full) since `last`, appending each reply. Returns the state to store after them
-- (tokens, last and the reset_after_ms of the last grant), or nil when nothing was taken.
local function token_bucket_run(tokens, last, count, max_permits, rate, permits, enabled,
    shadow, version)
  local granted_reset = nil
  local r = 0
  while r < count do
    local code, remaining, retry, reset, t, l = token_bucket_decide(tokens, last, max_permits,
      rate, now, permits, enabled)
    if code == DENIED and shadow then
      code = SHADOW_DENIED
    end
    local answered = 1
    if t then
      tokens, last, granted_reset = t, l, reset
    else
      -- Nothing taken: the rest of the run, asking for as much at the same instant, gets
      -- the same answer.
      answered = count - r
    end
    local reply = pack(REPLY_FORMAT, code, remaining, retry, reset, max_permits, version)
    for _ = 1, answered do
      n = n + 1
      out[n] = reply
    end
    r = r + answered
  end
  if granted_reset then
    return tokens, last, granted_reset
  end
  return nil
end

local function repeat_reply(reply, count)
  local packed = pack(REPLY_FORMAT, reply[1], reply[2], reply[3], reply[4], reply[5], reply[6])
  for _ = 1, count do
    n = n + 1
    out[n] = packed
  end
end

local function bad_permits(permits, max_permits)
  return not permits or permits < 1 or permits > max_permits or permits ~= floor(permits)
end

-- One entry of a global token bucket: `count` requests of `permits` by `app`, with the
-- configuration this instance passed (version and created nil when it does not know the
-- policy).
local function token_bucket_global_entry(key, state_key, count, permits, app, max_permits,
    rate, gate, version, created, move)
  local raw = redis.call('GET', state_key)
  if raw and #raw == 32 then
    local tokens, last, stored_created, stored_version = unpack_packed(TOKEN_BUCKET_STATE, raw)
    if stored_version == version and stored_created == created then
      if bad_permits(permits, max_permits) then
        repeat_reply({REPLY.PERMITS_REFUSED, 0, 0, 0, max_permits, version}, count)
        return
      end
      tokens, last = token_bucket_run(tokens, last, count, max_permits, rate, permits,
        gate ~= 0, gate == 2, version)
      if tokens then
        redis.call('SET', state_key, pack(TOKEN_BUCKET_STATE, tokens, last, created, version))
      end
      return
    end
  end
  local b = token_bucket_opened(raw, key, move)
  local refused, enabled, shadow
  refused, max_permits, rate, version, created, enabled, shadow = token_bucket_config(b, key,
    permits, app, max_permits, rate, gate, version, created)
  if refused then
    repeat_reply(refused, count)
    return
  end
  local tokens, last = token_bucket_run(b.tokens, b.last, count, max_permits, rate, permits,
    enabled, shadow, version or 0)
  if tokens then
    b.tokens, b.last, b.version, b.created = tokens, last, version, created
    token_bucket_store(key, state_key, b)
  end
end

-- A token bucket's entries come packed (PACKED, minus it for a caller's bucket): one
-- argument after the kind holds the count and the request's numbers, read at once instead
-- of one Lua string and one tonumber each (their layouts below, struct's notation).
local PACKED = BATCH_ARGS.packed
local PACKED_GLOBAL = '<i4i8i8di1i8i8i1s'
local PACKED_KEYED = '<i4i8i8di1i8'

while a <= args do
  local kind = tonumber(ARGV[a])
  local key = KEYS[k]
  local count = 0
  local with_id = kind == SLIDING_LOG or kind == -SLIDING_LOG or kind == CONCURRENCY
    or kind == -CONCURRENCY
  if kind == TOKEN_BUCKET or kind == PACKED then
    -- count, permits, max_permits, rate, gate, version, created_ms (-1 both when the instance
    -- does not know the policy), move (1/0), app
    local permits, app, max_permits, rate, gate, version, created, move
    if kind == PACKED then
      local moves
      count, permits, max_permits, rate, gate, version, created, moves, app = unpack_packed(
        PACKED_GLOBAL, ARGV[a + 1])
      move = moves == 1
    else
      count, permits, app = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3]
      max_permits, rate, gate, version, created, move = token_bucket_passed(ARGV, a + 4)
    end
    token_bucket_global_entry(key, KEYS[k + 1], count, permits, app, max_permits, rate, gate,
      version, created, move)
  elseif kind == -TOKEN_BUCKET or kind == -PACKED then
    -- count, permits, max_permits, rate, gate, version
    local permits, max_permits, rate, gate, version
    if kind == -PACKED then
      count, permits, max_permits, rate, gate, version = unpack_packed(PACKED_KEYED, ARGV[a + 1])
    else
      count, permits, max_permits = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
        tonumber(ARGV[a + 3])
      rate, gate, version = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]),
        tonumber(ARGV[a + 6]) or 0
    end
    local refused = keyed_refusal(permits, max_permits, version)
    if refused then
      repeat_reply(refused, count)
    else
      local hold
      gate, hold = keyed_gate(gate)
      local tokens, last, held_until = load_keyed_token_bucket(redis.call('GET', key))
      local reset
      tokens, last, reset = token_bucket_run(tokens, last, count, max_permits, rate, permits,
        gate ~= 0, gate == 2, version)
      if tokens then
        store_keyed_token_bucket(key, tokens, last, reset, now, hold, held_until)
      end
    end
  elseif kind > 0 then
    local id = nil
    if with_id then
      id = ARGV[a + 4]
    end
    local state_key = nil
    if WITH_STATE_KEY[kind] then
      state_key = KEYS[k + 1]
    end
    local decide = ACQUIRE_GLOBAL[kind]
    local permits, app = tonumber(ARGV[a + 2]), ARGV[a + 3]
    count = tonumber(ARGV[a + 1])
    for _ = 1, count do
      repeat_reply(decide(key, state_key, permits, app, id, now_us), 1)
    end
  else
    count = tonumber(ARGV[a + 1])
    for _ = 1, count do
      repeat_reply(keyed_acquire(ACQUIRE_KEYED[-kind], key, ARGV, a + 2, now_us), 1)
    end
  end
  -- On to the next entry: after its kind and count, a global one takes BATCH_ARGS.global
  -- arguments (a token bucket BATCH_ARGS.token_bucket), a keyed one BATCH_ARGS.keyed (put
  -- ahead of this script from the Rust side that sends them), and each one more with an id.
  if kind == PACKED then
    a = a + 2
    k = k + 2
  elseif kind == -PACKED then
    a = a + 2
    k = k + 1
  elseif kind == TOKEN_BUCKET then
    a = a + 2 + BATCH_ARGS.token_bucket
    k = k + 2
  elseif kind > 0 then
    a = a + 2 + BATCH_ARGS.global
    k = k + 1
    if WITH_STATE_KEY[kind] then
      k = k + 1
    end
  else
    a = a + 2 + BATCH_ARGS.keyed
    k = k + 1
  end
  if with_id then
    a = a + 1
  end
end
return table.concat(out)
