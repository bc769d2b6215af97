#!lua flags=no-writes
-- The live view of many policies at once, for the console's pages: each one's state
-- (lib/policy_state.lua, all at the same instant of Redis' clock) and its granted/denied
-- counts of the last minutes, with shadow mode's would-be denials, in one call whatever the
-- number of policies.
--
-- KEYS    8 or 11 per policy: its hash, token-bucket state, fixed-window counter, sliding
--         log and leases (as the acquire scripts take them), then this hour's usage minutes
--         (<prefix>:activity:{<policy>}:m:<hour>: 120 big-endian u32, granted then denied
--         for each minute of the hour; crates/limiter/src/counts/usage.rs writes them), its
--         shadow minutes (:sm:<hour>: one u32 a minute) and its refusals for want of Redis
--         (:um:<hour>: the same); then, only when the minutes asked begin in the previous
--         hour, the same three of the previous hour.
-- ARGV    the byte ranges wanted of the usage strings, the same for every policy, as
--         GETRANGE takes them (inclusive start and end, in decimal): [1],[2] of this hour's,
--         then [3],[4] of the previous hour's when its keys are given. The shadow and
--         refusal strings' ranges are the same minutes (half the bytes). They stay strings:
--         a Lua number given to redis.call is formatted with sprintf on every call.
--
-- Reply   4 strings per policy (a reply of few elements costs Redis and its reader less
--         than one of many):
--         1. the state: policy_state's reply joined with commas ("current,max_permits,
--            rate,version,updated_ms,full_in_ms,algorithm_index"), "" when Redis does not
--            hold the policy or it is keyed;
--         2. its usage minutes asked: the previous hour's range (zero-filled to its full
--            length) then this hour's;
--         3. and 4. the same of the shadow string and of the refusal string (one u32 a
--            minute).
--         A range's minutes past the end of its string were never counted: the reader
--         takes them as zero.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- A range as GETRANGE's two arguments of the usage string, then of the half-size strings,
-- then the two lengths in bytes.
local function ranges(from, to)
  local half_from = math.floor(tonumber(from) / 2)
  local half_to = math.floor((tonumber(to) + 1) / 2) - 1
  return {from, to, string.format('%d', half_from), string.format('%d', half_to),
    tonumber(to) - tonumber(from) + 1, half_to - half_from + 1}
end
local this_hour = ranges(ARGV[1], ARGV[2])
local previous_hour = ARGV[3] and ranges(ARGV[3], ARGV[4])
local stride = previous_hour and 11 or 8

-- The usage, shadow and refusal minutes of one hour, from its three keys at `first`.
local function minutes(first, r)
  return redis.call('GETRANGE', KEYS[first], r[1], r[2]),
    redis.call('GETRANGE', KEYS[first + 1], r[3], r[4]),
    redis.call('GETRANGE', KEYS[first + 2], r[3], r[4])
end

-- `s` zero-filled to `length` bytes, so that this hour's minutes follow at their place.
local function filled(s, length)
  if #s < length then
    return s .. string.rep('\0', length - #s)
  end
  return s
end

local function packed(state)
  if not state[1] then
    return ''
  end
  return string.format('%s,%d,%s,%d,%d,%d,%d', state[1], state[2], state[3], state[4],
    state[5], state[6], state[7])
end

local out = {}
for i = 1, #KEYS, stride do
  out[#out + 1] = packed(policy_state(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3],
    KEYS[i + 4], now_us))
  local usage, shadow, refused = minutes(i + 5, this_hour)
  if previous_hour then
    local usage_before, shadow_before, refused_before = minutes(i + 8, previous_hour)
    usage = filled(usage_before, previous_hour[5]) .. usage
    shadow = filled(shadow_before, previous_hour[6]) .. shadow
    refused = filled(refused_before, previous_hour[6]) .. refused
  end
  out[#out + 1] = usage
  out[#out + 1] = shadow
  out[#out + 1] = refused
end
return out
