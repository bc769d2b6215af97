-- GCRA, one caller's bucket of a keyed policy (arguments: lua/keyed/common.lua, decision:
-- lua/lib/gcra.lua, both loaded ahead of this).
-- State: a string of one little-endian double, the tat, expiring when it is reached.
local raw = redis.call('GET', bucket)
local tat
if raw and #raw == 8 then
  tat = struct.unpack('<d', raw)
end
local reply, new_tat = gcra_decide(tat, max_permits, param, now, permits, enabled)
if new_tat then
  if reply[4] <= 0 then
    redis.call('DEL', bucket)
  else
    redis.call('SET', bucket, struct.pack('<d', new_tat), 'PX',
      string.format('%d', reply[4] + 1))
  end
end
return finish(reply)
