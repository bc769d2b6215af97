-- Redis' clock, read once per script call (once per batch): every instance sees the same
-- one. Whole microseconds, exact in a double; the algorithms that work in ms divide by
-- 1000 and keep the fraction, so a single script and the batch script, given the same
-- reading, compute the same times. Loaded ahead of the acquire scripts; it only defines.
local function redis_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
