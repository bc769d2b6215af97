-- One instance's counts of some policies over a flush (every 2 s), added in one call: per
-- policy, the granted and denied pair of the minute and of the hour (saturating u32
-- counters, see src/counts/usage.rs), shadow mode's would-be denials beside them, and the
-- minute's top callers by outcome, each set trimmed to the highest ARGV[6]
-- (src/counts/top_keys.rs). Every key of a policy carries its hash tag; on a cluster a call
-- takes one policy, so that it stays in one slot (src/counts/flush.rs).
--
-- KEYS     7 per policy, in order: its minutes string of the hour, its hours string of
--          the day, the shadow minutes string of the hour, the shadow hours string, and the
--          minute's top callers granted, denied and shadow-denied
-- ARGV[1]  the u32 index of the minute's granted count in a minutes string (denied is the
--          next)
-- ARGV[2]  the u32 index of the hour's granted count in an hours string
-- ARGV[3]  ms a minutes string is kept, ARGV[4] an hours string, ARGV[5] a top set
-- ARGV[6]  callers kept in a top set
-- ARGV[7..] per policy, in the order of KEYS: granted, denied, shadow-denied (0: the shadow
--          strings untouched), how many (caller, count) pairs follow for granted, denied
--          and shadow-denied, then the pairs themselves, in that order
--
-- Reply: how many policies were flushed.
--
-- An expiry is set when its key has none (PTTL -1): once, when the key is made, instead of
-- at every flush. A key that expired or that Redis lost (a restart, a flush) comes back
-- without one and gets it then; a set one is left alone, so nothing is rewritten.

local function expire_once(key, ms)
  if redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, ms)
  end
end

local function add_counts(key, index, counts, keep_ms)
  local args = {'BITFIELD', key, 'OVERFLOW', 'SAT'}
  for i, n in ipairs(counts) do
    args[#args + 1] = 'INCRBY'
    args[#args + 1] = 'u32'
    args[#args + 1] = '#' .. (index + i - 1)
    args[#args + 1] = n
  end
  redis.call(unpack(args))
  expire_once(key, keep_ms)
end

local minute_index, hour_index = tonumber(ARGV[1]), tonumber(ARGV[2])
local keep_minutes, keep_hours, keep_top = ARGV[3], ARGV[4], ARGV[5]
local keep_callers = tonumber(ARGV[6])
local at = 7
local flushed = 0
for k = 1, #KEYS, 7 do
  local granted, denied, shadow = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  add_counts(KEYS[k], minute_index, {granted, denied}, keep_minutes)
  add_counts(KEYS[k + 1], hour_index, {granted, denied}, keep_hours)
  if shadow ~= '0' then
    -- One u32 a slot: the minute's and the hour's slot are half the pair indexes.
    add_counts(KEYS[k + 2], math.floor(minute_index / 2), {shadow}, keep_minutes)
    add_counts(KEYS[k + 3], math.floor(hour_index / 2), {shadow}, keep_hours)
  end
  local counts_at = at + 3
  at = at + 6
  for outcome = 1, 3 do
    local pairs_of = tonumber(ARGV[counts_at + outcome - 1])
    if pairs_of > 0 then
      local key = KEYS[k + 3 + outcome]
      for _ = 1, pairs_of do
        redis.call('ZINCRBY', key, ARGV[at + 1], ARGV[at])
        at = at + 2
      end
      redis.call('ZREMRANGEBYRANK', key, 0, -(keep_callers + 1))
      expire_once(key, keep_top)
    end
  end
  flushed = flushed + 1
end
return flushed
