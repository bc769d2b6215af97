#!lua flags=no-writes
-- Reads the live state of one policy of any algorithm (lib/policy_state.lua, which says what
-- the reply holds) at this moment on Redis' clock, without writing anything: the no-writes
-- flag makes Redis refuse any write, and lets the script run on a replica. For
-- GET /api/v1/policies/{name}/state and the console.
--
-- KEYS[1..5]  the policy's hash, token-bucket state, fixed-window counter, sliding log and
--             leases. No ARGV.
local t = redis.call('TIME')
return policy_state(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5],
  tonumber(t[1]) * 1000000 + tonumber(t[2]))
