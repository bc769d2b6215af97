-- One instance's counts of one policy over a flush (every 2 s), added in one call: the
-- granted and denied pair of the minute and of the hour (saturating u32 counters, see
-- src/counts/usage.rs), shadow mode's would-be denials beside them, and the minute's top
-- callers by outcome, each set trimmed to the highest ARGV[9] (src/counts/top_keys.rs).
-- Every key carries the policy's hash tag: one call stays in one slot of a cluster.
--
-- KEYS[1]  the policy's minutes string of the hour   KEYS[2] its hours string of the day
-- KEYS[3]  the shadow minutes string of the hour     KEYS[4] the shadow hours string
-- KEYS[5]  the minute's top callers granted, KEYS[6] denied, KEYS[7] shadow-denied
-- ARGV[1]  the u32 index of the minute's granted count in KEYS[1] (denied is the next)
-- ARGV[2]  the u32 index of the hour's granted count in KEYS[2]
-- ARGV[3]  granted  ARGV[4] denied  ARGV[5] shadow-denied (0: the shadow strings untouched)
-- ARGV[6]  ms a minutes string is kept, ARGV[7] an hours string, ARGV[8] a top set
-- ARGV[9]  callers kept in a top set
-- ARGV[10], ARGV[11], ARGV[12]  how many (caller, count) pairs follow for granted, denied
--          and shadow-denied, then the pairs themselves, in that order
--
-- Reply: 1.
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
add_counts(KEYS[1], minute_index, {ARGV[3], ARGV[4]}, ARGV[6])
add_counts(KEYS[2], hour_index, {ARGV[3], ARGV[4]}, ARGV[7])
if ARGV[5] ~= '0' then
  -- One u32 a slot: the minute's and the hour's slot are half the pair indexes.
  add_counts(KEYS[3], math.floor(minute_index / 2), {ARGV[5]}, ARGV[6])
  add_counts(KEYS[4], math.floor(hour_index / 2), {ARGV[5]}, ARGV[7])
end

local keep_callers = tonumber(ARGV[9])
local at = 13
for outcome = 1, 3 do
  local pairs_of = tonumber(ARGV[9 + outcome])
  if pairs_of > 0 then
    local key = KEYS[4 + outcome]
    for _ = 1, pairs_of do
      redis.call('ZINCRBY', key, ARGV[at + 1], ARGV[at])
      at = at + 2
    end
    redis.call('ZREMRANGEBYRANK', key, 0, -(keep_callers + 1))
    expire_once(key, ARGV[8])
  end
end
return 1
