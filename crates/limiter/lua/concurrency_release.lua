-- Concurrency limit, the release half: gives back every permit of one lease, atomically.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- KEYS[2]  the leases, <prefix>:{<policy name>}:leases (see concurrency_acquire.lua)
-- ARGV[1]  the calling application's slug (the one that acquired the lease)
-- ARGV[2]  the lease id given to concurrency_acquire.lua
--
-- No membership check: an app removed from the policy since it acquired may still give
-- its lease back. The policy must exist and use leases: Redis, not the caller's possibly
-- stale copy, says whether it does (a policy that changed algorithm had its leases
-- discarded by sync_policy.lua).
--
-- Reply: {code, remaining, released, reset_after_ms, max_permits, version}
--   code      1 released; -5 refused: no such lease held (unknown, expired, already
--             released, or another application's lease: members are prefixed by the app);
--             0 no such policy; -4 the policy uses another algorithm: {-4, index, 0, 0, 0,
--             version} with its number in ALGORITHM_INDEX (0 unknown)
--   remaining permits free after this call (0 when the policy is gone)
--   released  permits given back
--   reset_after_ms  time until the last lease still held expires (0 when none is held)
local key = KEYS[1]
local leases = KEYS[2]
local app = ARGV[1]
local lease_id = ARGV[2] or ''

local h = redis.call('HMGET', key, 'max_permits', 'version', 'algorithm')
local max_permits = tonumber(h[1])
local version = tonumber(h[2]) or 0
if not max_permits then
  return {REPLY.NO_SUCH_POLICY, 0, 0, 0, 0, 0}
end
if h[3] ~= 'concurrency' then
  -- ALGORITHM_INDEX is defined ahead of this script when it is loaded.
  return {REPLY.WRONG_ALGORITHM, ALGORITHM_INDEX[h[3] or 'token_bucket'] or 0, 0, 0, 0, version}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

-- The release (lua/lib/concurrency.lua, loaded ahead of this).
local reply = concurrency_release(leases, max_permits, now, app .. '|' .. lease_id .. '|')
reply[5] = max_permits
reply[6] = version
return reply
