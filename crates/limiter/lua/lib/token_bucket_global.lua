-- A global token-bucket policy: its configuration in its hash (written by the sync, read by
-- the console), its state in a key of its own beside it, <prefix>:{<policy name>}:tb: one
-- string of 32 bytes, two little-endian doubles (tokens, and the ms of the last write) then
-- the id of the configuration that last decided on it, its created_ms and version, two
-- little-endian integers (a policy deleted and made again starts its versions again), so
-- that an acquire reads and writes one short string. The instance passes the policy's
-- configuration from its snapshot with its id; it decides when that id is the state's (the
-- sync keeps the state's id that of the hash, lua/sync_policy.lua), else the hash is read
-- and decides, exactly as when the instance's view is older or newer than Redis'.
--
-- The state of a policy last decided by a version of ratekeeper before the state key is
-- in the hash's fields curr_permits and last_mill_second, which those versions read and
-- write. An acquire that may move it (`move`, an instance with RATEKEEPER_REDIS_STATE
-- packed) writes it to the state key and deletes those fields; one that may not (hash:
-- while instances of such a version still run) reads and writes it where it is. Once in
-- the state key it stays there, and every instance of this version decides on it.
-- Shared by the single script (token_bucket.lua) and the scripts that take requests of
-- every algorithm (acquire_batch.lua, acquire_all.lua, give_back.lua). Loaded after
-- lib/token_bucket.lua and lib/acquire_gate.lua; it only defines.
--
-- The request's configuration, as the instance passes it: max_permits, rate, gate (1
-- enforce, 2 shadow, 0 disabled), version and created_ms (nil when the instance does not
-- know the policy: the hash decides), move. As strings (argv[at] on: lib/keyed.lua's order,
-- then the incarnation and the move, "-" for an unknown version and created_ms, "1"/"0"
-- for move) token_bucket_passed reads them; the batch script reads them packed.
--
-- token_bucket_passed(argv, at)  -> max_permits, rate, gate, version, created, move
-- token_bucket_opened(raw, key, move)  the bucket as the call finds it, raw the state key's
--   GET reply (token_bucket_open(key, state_key, move) reads it): a table with
--   tokens, last (nil: never used, full), version and created (numbers: the configuration
--   its state was decided with, or the hash's when its state is in the hash or nowhere),
--   h (the hash's HMGET reply of TOKEN_BUCKET_FIELDS when read), packed (its state goes to
--   the state key), moved (its state is still in the hash's fields, to be deleted at its
--   first write)
-- token_bucket_config(b, key, permits, app, max_permits, rate, gate, version, created)  the
--   configuration one request is decided with: a refusal's reply, or nil and max_permits,
--   rate, version, created, enabled, shadow (the request's when its version and created_ms
--   are the bucket's, else the hash's, read once)
-- token_bucket_store(key, state_key, b)  writes the bucket's state where it lives: in the
--   state key, TOKEN_BUCKET_STATE: tokens, last, created_ms, version
-- token_bucket_acquire_global(key, state_key, permits, app, _, now_us, argv, at) -> reply
-- token_bucket_give_back_global(key, state_key, permits, app, _, _, now_us, argv, at)
local TOKEN_BUCKET_FIELDS = {'max_permits', 'rate', 'apps', 'enabled', 'version',
  'curr_permits', 'last_mill_second', 'algorithm', 'scope', 'mode', 'created_ms'}
local TOKEN_BUCKET_STATE = '<d<d<i8<i8'

local function token_bucket_passed(argv, at)
  return tonumber(argv[at]), tonumber(argv[at + 1]), tonumber(argv[at + 2]),
    tonumber(argv[at + 3]), tonumber(argv[at + 4]), argv[at + 5] == '1'
end

local function token_bucket_opened(raw, key, move)
  if raw and #raw == 32 then
    local tokens, last, created, version = struct.unpack(TOKEN_BUCKET_STATE, raw)
    return {tokens = tokens, last = last, created = created, version = version, packed = true}
  end
  local h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
  local tokens, last = tonumber(h[6]), tonumber(h[7])
  return {tokens = tokens, last = last, created = tonumber(h[11]) or 0,
    version = tonumber(h[5]) or 0, h = h, packed = move, moved = move and tokens ~= nil}
end

local function token_bucket_open(key, state_key, move)
  return token_bucket_opened(redis.call('GET', state_key), key, move)
end

local function token_bucket_gate(h, app, permits)
  local refused, max_permits, version, enabled, shadow, rate = policy_gate('token_bucket', h[1],
    h[3], h[4], h[5], h[8], h[2], h[9], h[10], permits, app)
  if refused then
    return refused
  end
  return nil, max_permits, rate, version, tonumber(h[11]) or 0, enabled, shadow
end

local function token_bucket_config(b, key, permits, app, max_permits, rate, gate, version,
    created)
  if version == b.version and created == b.created then
    if not permits or permits < 1 or permits > max_permits or permits ~= math.floor(permits) then
      return {REPLY.PERMITS_REFUSED, 0, 0, 0, max_permits, version}
    end
    return nil, max_permits, rate, version, created, gate ~= 0, gate == 2
  end
  if not b.h then
    b.h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
  end
  return token_bucket_gate(b.h, app, permits)
end

-- %.17g keeps every bit of a double in the hash (Redis' own conversion would round to 14
-- digits), for the versions that read it there.
local function token_bucket_store(key, state_key, b)
  if b.packed then
    redis.call('SET', state_key, struct.pack(TOKEN_BUCKET_STATE, b.tokens, b.last, b.created,
      b.version))
    if b.moved then
      redis.call('HDEL', key, 'curr_permits', 'last_mill_second')
      b.moved = false
    end
  else
    redis.call('HSET', key, 'curr_permits', string.format('%.17g', b.tokens),
      'last_mill_second', string.format('%.17g', b.last))
  end
end

local function token_bucket_acquire_global(key, state_key, permits, app, _, now_us, argv, at)
  local max_permits, rate, gate, version, created, move = token_bucket_passed(argv, at)
  local b = token_bucket_open(key, state_key, move)
  local refused, shadow, enabled
  refused, max_permits, rate, version, created, enabled, shadow = token_bucket_config(b, key,
    permits, app, max_permits, rate, gate, version, created)
  if refused then
    return refused
  end
  local code, remaining, retry, reset, tokens, last = token_bucket_decide(b.tokens, b.last,
    max_permits, rate, now_us / 1000, permits, enabled)
  -- Shadow mode: granted, though the limit would have denied (nothing consumed either way).
  if code == REPLY.DENIED and shadow then
    code = REPLY.SHADOW_DENIED
  end
  if tokens then
    b.tokens, b.last, b.version, b.created = tokens, last, version, created
    token_bucket_store(key, state_key, b)
  end
  return {code, remaining, retry, reset, max_permits, version}
end

-- Gives `permits` back to the policy's bucket (lib/token_bucket.lua's token_bucket_give)
-- after the checks of an acquire of one permit. Reply: {code, remaining, 0, reset_after_ms,
-- max_permits, version} as the bucket is after it (acquire_gate.lua's given()), or a
-- refusal.
local function token_bucket_give_back_global(key, state_key, permits, app, _, _, now_us, argv,
    at)
  local max_permits, rate, gate, version, created, move = token_bucket_passed(argv, at)
  local b = token_bucket_open(key, state_key, move)
  local refused, enabled
  refused, max_permits, rate, version, created, enabled = token_bucket_config(b, key, 1, app,
    max_permits, rate, gate, version, created)
  if refused then
    return refused
  end
  local now = now_us / 1000
  if enabled then
    b.tokens, b.last = token_bucket_give(b.tokens, b.last, max_permits, rate, now, permits)
    b.version, b.created = version, created
    token_bucket_store(key, state_key, b)
  end
  local _, remaining, _, reset = token_bucket_decide(b.tokens, b.last, max_permits, rate, now, 1,
    false)
  return given({0, remaining, 0, reset}, {max_permits = max_permits, version = version,
    enabled = enabled})
end
