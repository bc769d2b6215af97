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
-- without one and gets it then; a set one is left alone, so nothing is rewritten. Its
-- PTTL is asked only when the key may be new: a count whose slot held nothing before (the
-- slot's new value is what was added: at a minute's first flush; or nothing added at all),
-- a caller new to a top
-- set (its new score is what was added; the set is trimmed only then too, as only a new
-- member can make it longer). Otherwise the key was there before this call, and got its
-- expiry from the call that made it.

local function expire_once(key, ms)
  if redis.call('PTTL', key) == -1 then
    redis.call('PEXPIRE', key, ms)
  end
end

-- Adds `first` (and `second`, when given) to the u32 slots at `field` (and the next,
-- `field_next`: BITFIELD's '#<index>' offsets, the same for every policy of the call, made
-- once) of the string at `key`, saturating; then its expiry, when the key may be new.
local function add_counts(key, field, field_next, keep_ms, first, second)
  local now
  if second then
    now = redis.call('BITFIELD', key, 'OVERFLOW', 'SAT', 'INCRBY', 'u32', field, first,
      'INCRBY', 'u32', field_next, second)
  else
    now = redis.call('BITFIELD', key, 'OVERFLOW', 'SAT', 'INCRBY', 'u32', field, first)
  end
  -- A slot's new value equal to what was added: it held nothing before. Nothing added
  -- tells nothing of the key, which BITFIELD made if it was not there.
  local one, two = tonumber(first), tonumber(second or 0)
  if (one > 0 and now[1] == one) or (two > 0 and now[2] == two) or (one == 0 and two == 0) then
    expire_once(key, keep_ms)
  end
end

local minute_index, hour_index = tonumber(ARGV[1]), tonumber(ARGV[2])
local function field(index)
  return '#' .. index
end
local minute, minute_next = field(minute_index), field(minute_index + 1)
local hour, hour_next = field(hour_index), field(hour_index + 1)
-- One u32 a slot in the shadow strings: the minute's and the hour's slot are half the pair
-- indexes.
local shadow_minute = field(math.floor(minute_index / 2))
local shadow_hour = field(math.floor(hour_index / 2))
local keep_minutes, keep_hours, keep_top = ARGV[3], ARGV[4], ARGV[5]
local keep_callers = tonumber(ARGV[6])
local at = 7
local flushed = 0
for k = 1, #KEYS, 7 do
  local granted, denied, shadow = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  add_counts(KEYS[k], minute, minute_next, keep_minutes, granted, denied)
  add_counts(KEYS[k + 1], hour, hour_next, keep_hours, granted, denied)
  if shadow ~= '0' then
    add_counts(KEYS[k + 2], shadow_minute, nil, keep_minutes, shadow)
    add_counts(KEYS[k + 3], shadow_hour, nil, keep_hours, shadow)
  end
  local counts_at = at + 3
  at = at + 6
  for outcome = 1, 3 do
    local pairs_of = tonumber(ARGV[counts_at + outcome - 1])
    if pairs_of > 0 then
      local key = KEYS[k + 3 + outcome]
      local joined = false
      for _ = 1, pairs_of do
        local added = ARGV[at + 1]
        if tonumber(redis.call('ZINCRBY', key, added, ARGV[at])) == tonumber(added) then
          joined = true
        end
        at = at + 2
      end
      if joined then
        redis.call('ZREMRANGEBYRANK', key, 0, -(keep_callers + 1))
        expire_once(key, keep_top)
      end
    end
  end
  flushed = flushed + 1
end
return flushed
