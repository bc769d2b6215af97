-- Sliding window, one caller's counters of a keyed policy (arguments: lua/keyed/common.lua,
-- decision: lua/lib/sliding_window.lua, both loaded ahead of this).
-- State: a string of three little-endian doubles (window start in ms, this window's count,
-- the previous window's), expiring after two windows (when both counts are 0 anyway).
local raw = redis.call('GET', bucket)
local start, curr, prev
if raw and #raw == 24 then
  start, curr, prev = struct.unpack('<d<d<d', raw)
end
local reply, state = sliding_window_decide(start, curr, prev, max_permits, param, now_us,
  permits, enabled)
if state then
  redis.call('SET', bucket, struct.pack('<d<d<d', state[1], state[2], state[3]), 'PX',
    2 * param + 1)
end
return finish(reply)
