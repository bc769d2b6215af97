-- Deletes a policy's hash left behind in Redis, unless it was written by an incarnation
-- created after the caller read the SQL store (then another instance just created it).
--
-- KEYS[1]  the policy's hash
-- ARGV[1]  created_ms bound: delete only when the hash's created_ms is below it
--
-- Reply: 1 deleted, 0 kept.
local created = tonumber(redis.call('HGET', KEYS[1], 'created_ms'))
if created and created >= tonumber(ARGV[1]) then
  return 0
end
return redis.call('DEL', KEYS[1])
