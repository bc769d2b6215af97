-- Deletes a policy's hash left behind in Redis, unless it was written by an incarnation
-- created after the caller read the SQL store (then another instance just created it).
--
-- KEYS[1]  the policy's hash
-- KEYS[2..] optional: the policy's state keys (<prefix>:{<policy name>}:tb, :fw, :log,
--          :leases), deleted with it
-- ARGV[1]  created_ms bound: delete only when the hash's created_ms is below it
--
-- Reply: 1 deleted, 0 kept (the reply counts the policy's hash only, not its state keys).
local created = tonumber(redis.call('HGET', KEYS[1], 'created_ms'))
if created and created >= tonumber(ARGV[1]) then
  return 0
end
local deleted = redis.call('DEL', KEYS[1])
if #KEYS > 1 then
  redis.call('DEL', unpack(KEYS, 2))
end
return deleted
