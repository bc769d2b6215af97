-- Gives back every permit of one lease of a keyed concurrency policy (the release in
-- lua/lib/concurrency.lua, loaded ahead of this).
--
-- KEYS[1]  the caller's leases, <prefix>:k:{<hash of policy, generation and caller>}
-- ARGV[1]  max_permits
-- ARGV[2]  the lease members' prefix "<app>|<lease id>|"
-- ARGV[3]  the policy's version (echoed)
--
-- Reply: {code, remaining, released, reset_after_ms, max_permits, version} with code 1
-- released, -5 no such lease held.
local max_permits = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local reply = concurrency_release(KEYS[1], max_permits, now, ARGV[2])
reply[5] = max_permits
reply[6] = tonumber(ARGV[3]) or 0
return reply
