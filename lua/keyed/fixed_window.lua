-- Fixed window, one caller's counter of a keyed policy (arguments: lua/keyed/common.lua,
-- decision: lua/lib/fixed_window.lua, both loaded ahead of this).
-- State: a string of two little-endian doubles, the window's start (ms) and its count,
-- written only together with the expiry at the window's end.
local raw = redis.call('GET', bucket)
local start, count
if raw and #raw == 16 then
  start, count = struct.unpack('<d<d', raw)
end
local reply, state, ttl = fixed_window_decide(start, count, max_permits, param, now_us,
  permits, enabled)
if state then
  redis.call('SET', bucket, struct.pack('<d<d', state[1], state[2]), 'PX', ttl)
end
return finish(reply)
