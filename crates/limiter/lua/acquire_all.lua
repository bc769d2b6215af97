-- Several acquires decided all or nothing (an `all` acquire, src/decide/all.rs; on a Redis
-- Cluster, the items of one hash slot): each item in order, exactly as the batch script
-- decides it (the same functions of lua/lib/, one clock reading), remembering what each
-- grant took. When any item is denied or refused, every grant is given back, the latest
-- first, before the script returns: the call consumes nothing. A check (an item that takes
-- nothing) is decided as one permit and always given back.
--
-- ARGV     per item, in order: its kind (as acquire_batch.lua's: the algorithm's number
--          in ALGORITHM_INDEX, minus it for a caller's bucket of a keyed policy), its take
--          ("1" an acquire; "0" a check, whose permits are 1), then the acquire's own
--          arguments (acquire_batch.lua's, with the id of a sliding_log or concurrency
--          acquire)
-- KEYS     per item, in order: as acquire_batch.lua's
--
-- Reply: one string of 8-byte little-endian integers (struct.pack's '<i8'): the clock
-- reading (whole microseconds: the instant of every grant, which a later give-back of
-- another slot's call names), then per item its single script's reply of 6 integers. An
-- item granted and then given back (a check, or any grant of a call that failed) keeps its
-- code and retry time, with the remaining permits and reset time of its bucket as they are
-- after the give-back (as before the call).
local now_us = redis_now_us()
local pack = struct.pack
local SLIDING_LOG = ALGORITHM_INDEX.sliding_log
local CONCURRENCY = ALGORITHM_INDEX.concurrency

local replies = {}
local taken = {}    -- per grant to give back if the call fails: {its reply, its give-back}
local failed = false
local a, k = 1, 1
while a <= #ARGV do
  local kind = tonumber(ARGV[a])
  local check = ARGV[a + 1] == '0'
  local key = KEYS[k]
  local with_id = kind == SLIDING_LOG or kind == -SLIDING_LOG or kind == CONCURRENCY
    or kind == -CONCURRENCY
  local reply, give
  if kind > 0 then
    local state_key = nil
    if WITH_STATE_KEY[kind] then
      state_key = KEYS[k + 1]
    end
    local permits, app, id = tonumber(ARGV[a + 2]), ARGV[a + 3], nil
    if with_id then
      id = ARGV[a + 4]
    end
    reply = ACQUIRE_GLOBAL[kind](key, state_key, permits, app, id, now_us, ARGV, a + 4)
    give = function()
      return GIVE_BACK_GLOBAL[kind](key, state_key, permits, app, id, now_us, now_us, ARGV,
        a + 4)
    end
  else
    local at = a + 2
    local id = nil
    if with_id then
      id = ARGV[at + BATCH_ARGS.keyed]
    end
    reply = keyed_acquire(ACQUIRE_KEYED[-kind], key, ARGV, at, now_us)
    give = function()
      return keyed_give_back(GIVE_BACK_KEYED[-kind], key, ARGV, at, id, now_us, now_us)
    end
  end
  local code = reply[1]
  if code == REPLY.GRANTED then
    if check then
      local after = give()
      reply[2], reply[4] = after[2], after[4]
    else
      taken[#taken + 1] = {reply, give}
    end
  elseif code ~= REPLY.UNENFORCED and code ~= REPLY.SHADOW_DENIED then
    -- Denied, or refused (no such policy, app not allowed, permits, another algorithm).
    failed = true
  end
  replies[#replies + 1] = reply
  if kind == ALGORITHM_INDEX.token_bucket then
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
if failed then
  for j = #taken, 1, -1 do
    local reply, give = taken[j][1], taken[j][2]
    local after = give()
    reply[2], reply[4] = after[2], after[4]
  end
end
local out = {pack('<i8', now_us)}
for _, r in ipairs(replies) do
  out[#out + 1] = pack('<i8i8i8i8i8i8', r[1], r[2], r[3], r[4], r[5], r[6])
end
return table.concat(out)
