-- Gives back what grants took: a refund (POST /v1/refund, src/decide/give_back.rs), or the
-- grants of an all-or-nothing acquire that another hash slot's call denied (on a Redis
-- Cluster, src/decide/all.rs). Each entry is given back by its algorithm's give-back in
-- lua/lib/<algorithm>.lua, after the checks of an acquire of one permit: a bucket refilled
-- by at most the permits and never above its capacity, a window's count lowered and never
-- below 0 (sliding_log: the grant's own entries, or for a refund the newest ones), GCRA's
-- tat moved back and never before now, a lease released (leases are never refunded: they
-- are released).
--
-- ARGV     per entry, in order: its kind (as acquire_batch.lua's), its instant: "0" for a
--          refund (now, and no id: of the newest grants), else the clock reading of the
--          call whose grant it undoes (acquire_all.lua's reply), then the acquire's own
--          arguments as acquire_batch.lua takes them (the permits are those to give back;
--          for sliding_log and concurrency the grant's id)
-- KEYS     per entry, in order: as acquire_batch.lua's
--
-- Reply: per entry, 6 integers {code, remaining, 0, reset_after_ms, max_permits, version}
--   code  GRANTED given back; UNENFORCED the policy is disabled (nothing given back); else
--         the refusal an acquire would get (NO_SUCH_POLICY, APP_NOT_ALLOWED,
--         PERMITS_REFUSED, WRONG_ALGORITHM with the policy's algorithm's number: a
--         concurrency policy's when a refund names one)
--   remaining, reset_after_ms  the bucket as it is after the give-back
local now_us = redis_now_us()
local SLIDING_LOG = ALGORITHM_INDEX.sliding_log
local CONCURRENCY = ALGORITHM_INDEX.concurrency

local out = {}
local a, k = 1, 1
while a <= #ARGV do
  local kind = tonumber(ARGV[a])
  local at_us = tonumber(ARGV[a + 1])
  local key = KEYS[k]
  local with_id = kind == SLIDING_LOG or kind == -SLIDING_LOG or kind == CONCURRENCY
    or kind == -CONCURRENCY
  local id_at = nil
  local reply
  if kind > 0 then
    if with_id then
      id_at = a + 2 + BATCH_ARGS.global
    end
  elseif with_id then
    id_at = a + 2 + BATCH_ARGS.keyed
  end
  -- A refund is of the newest grants, now: no grant of its own to name.
  local id = nil
  if at_us == 0 then
    at_us = now_us
  elseif id_at then
    id = ARGV[id_at]
  end
  if kind > 0 then
    local state_key = nil
    if WITH_STATE_KEY[kind] then
      state_key = KEYS[k + 1]
    end
    reply = GIVE_BACK_GLOBAL[kind](key, state_key, tonumber(ARGV[a + 2]), ARGV[a + 3], id, at_us,
      now_us, ARGV, a + 4)
  else
    reply = keyed_give_back(GIVE_BACK_KEYED[-kind], key, ARGV, a + 2, id, at_us, now_us)
  end
  for i = 1, 6 do
    out[#out + 1] = reply[i]
  end
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
return out
