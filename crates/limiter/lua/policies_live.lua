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
--         GETRANGE would take them (0-based inclusive start and end): [1],[2] of this
--         hour's, then [3],[4] of the previous hour's ("" when its keys are not given).
--         The shadow and refusal strings' ranges are the same minutes (half the bytes).
--         Then 4 per policy, what the database holds of it: "k" and three "" for a keyed
--         policy (its callers each have a bucket; no one state is read); a global token
--         bucket's max_permits, rate, version and created_ms, with which its state key is
--         read alone when that configuration last decided on it (else the hash is read, as
--         for any other policy); "-" and three "" for any other.
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

-- A range of the usage strings as string.sub takes it (1-based, inclusive), then of the
-- half-size strings, then the two lengths in bytes.
local function ranges(from, to)
  from, to = tonumber(from), tonumber(to)
  local half_from, half_to = math.floor(from / 2), math.floor((to + 1) / 2) - 1
  return {from + 1, to + 1, half_from + 1, half_to + 1, to - from + 1, half_to - half_from + 1}
end
local this_hour = ranges(ARGV[1], ARGV[2])
local previous_hour = ARGV[3] ~= '' and ranges(ARGV[3], ARGV[4])
local stride = previous_hour and 11 or 8

local function cut(s, from, to)
  if not s then
    return ''
  end
  return string.sub(s, from, to)
end

-- The usage, shadow and refusal minutes asked of one hour, from the whole strings.
local function minutes(usage, shadow, refused, r)
  return cut(usage, r[1], r[2]), cut(shadow, r[3], r[4]), cut(refused, r[3], r[4])
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

-- The state of the policy whose keys begin at KEYS[i] and whose stored configuration
-- begins at ARGV[c], its state key's value being `raw`.
local function state_of(i, c, raw)
  local kind = ARGV[c]
  if kind == 'k' then
    return ''
  end
  if kind ~= '-' and raw and #raw == 32 then
    local tokens, last, created, version = struct.unpack('<d<d<i8<i8', raw)
    if version == tonumber(ARGV[c + 2]) and created == tonumber(ARGV[c + 3]) then
      return packed(token_bucket_live(tokens, last, tonumber(kind), ARGV[c + 1], version,
        now_us))
    end
  end
  return packed(policy_state(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], KEYS[i + 4],
    now_us, raw))
end

local out = {}
local c = 5
for i = 1, #KEYS, stride do
  -- One MGET reads the token bucket's state and each count string whole (at most 480
  -- bytes); the minutes asked are cut out here. A command costs Redis far more than the
  -- bytes it returns.
  local s
  if previous_hour then
    s = redis.call('MGET', KEYS[i + 1], KEYS[i + 5], KEYS[i + 6], KEYS[i + 7], KEYS[i + 8],
      KEYS[i + 9], KEYS[i + 10])
  else
    s = redis.call('MGET', KEYS[i + 1], KEYS[i + 5], KEYS[i + 6], KEYS[i + 7])
  end
  out[#out + 1] = state_of(i, c, s[1])
  c = c + 4
  local usage, shadow, refused = minutes(s[2], s[3], s[4], this_hour)
  if previous_hour then
    local usage_before, shadow_before, refused_before = minutes(s[5], s[6], s[7],
      previous_hour)
    usage = filled(usage_before, previous_hour[5]) .. usage
    shadow = filled(shadow_before, previous_hour[6]) .. shadow
    refused = filled(refused_before, previous_hour[6]) .. refused
  end
  out[#out + 1] = usage
  out[#out + 1] = shadow
  out[#out + 1] = refused
end
return out
