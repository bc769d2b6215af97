#!lua flags=no-writes
-- The live view of many policies at once, for the console's pages: each one's state
-- (lib/policy_state.lua, all at the same instant of Redis' clock) and its granted/denied
-- counts of the last minutes, with shadow mode's would-be denials, in one call whatever the
-- number of policies.
--
-- KEYS    11 per policy: its hash, token-bucket state, fixed-window counter, sliding log
--         and leases (as the acquire scripts take them), then its usage minutes of the previous hour and of
--         this hour (<prefix>:activity:{<policy>}:m:<hour>: 120 big-endian u32, granted
--         then denied for each minute of the hour; crates/limiter/src/counts/usage.rs writes them),
--         then its shadow minutes of the same two hours (:sm:<hour>: one u32 a minute),
--         then its refusals for want of Redis of the same two hours (:um:<hour>: the same).
-- ARGV    the byte ranges wanted of those two strings, the same for every policy:
--         [1],[2] of the previous hour's, [3],[4] of this hour's (GETRANGE's inclusive
--         start and end; an end below its start means none).
--
-- Reply   7 per policy: the state (policy_state's reply, {} when Redis does not hold the
--         policy or it is keyed), then the two byte ranges, then the same minutes of the two
--         shadow strings and of the two refusal strings (half the bytes: one u32 a minute)
--         ("" where nothing was counted).
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local prev_from, prev_to = tonumber(ARGV[1]), tonumber(ARGV[2])
local this_from, this_to = tonumber(ARGV[3]), tonumber(ARGV[4])

local function range(key, from, to)
  if to < from then
    return ''
  end
  return redis.call('GETRANGE', key, from, to)
end

local function shadow_range(key, from, to)
  return range(key, math.floor(from / 2), math.floor((to + 1) / 2) - 1)
end

local out = {}
for i = 1, #KEYS, 11 do
  out[#out + 1] = policy_state(KEYS[i], KEYS[i + 1], KEYS[i + 2], KEYS[i + 3], KEYS[i + 4],
    now_us)
  out[#out + 1] = range(KEYS[i + 5], prev_from, prev_to)
  out[#out + 1] = range(KEYS[i + 6], this_from, this_to)
  out[#out + 1] = shadow_range(KEYS[i + 7], prev_from, prev_to)
  out[#out + 1] = shadow_range(KEYS[i + 8], this_from, this_to)
  out[#out + 1] = shadow_range(KEYS[i + 9], prev_from, prev_to)
  out[#out + 1] = shadow_range(KEYS[i + 10], this_from, this_to)
end
return out
