-- Concurrency limit: at most max_permits permits held at once, each lease expiring after
-- lease_ttl_ms unless released first, so a client that crashes while holding permits
-- cannot hold them for ever (an in-process counter decremented in `finally` would leak
-- them with the process). The acquire half, atomic.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- KEYS[2]  the leases, <prefix>:{<policy name>}:leases, a sorted set
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  the calling application's slug
-- ARGV[3]  the lease id, unique per acquire (made by the caller); concurrency_release.lua
--          takes it back
--
-- Hash fields read (config, written only by sync_policy.lua): max_permits, apps, enabled,
-- version, algorithm (must be concurrency), lease_ttl_ms.
-- Leases KEYS[2]: one member per permit held, "<app>|<lease id>|<i>" (i = 1..permits),
-- score = its expiry, Redis time in ms. Expired members are reclaimed on every call. The set
-- expires with its last lease, so an idle policy leaves nothing behind. Lease ids must be
-- unique: acquiring again with one still held renews its members, counting them anew
-- (conservative: never more than max_permits held).
--
-- (Code 3: granted in shadow mode where it would have denied; see decided() in
-- lua/lib/acquire_gate.lua.)
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted (the lease is held); -1 denied (nothing taken); 0 no such policy;
--        -2 app not allowed; -3 permits above max_permits; 2 granted unenforced (policy
--        disabled: no lease is recorded, nothing to release); -4 the policy uses another
--        algorithm: {-4, index, 0, 0, 0, version} with its number in ALGORITHM_INDEX
--        (0 unknown).
--   remaining       permits free after this call.
--   retry_after_ms  when denied: time until enough leases EXPIRE (an upper bound: a release
--                   frees them sooner).
--   reset_after_ms  time until the last lease held expires (0 when none is held).
local key = KEYS[1]
local leases = KEYS[2]
local permits = tonumber(ARGV[1])
local app = ARGV[2]
local lease_id = ARGV[3] or ''

-- The checks shared by the algorithms (lua/lib/acquire_gate.lua, loaded ahead of this).
local reply, policy = acquire_gate(key, 'concurrency', 'lease_ttl_ms', {}, permits, app)
if reply then
  return reply
end
local max_permits, version, ttl = policy.max_permits, policy.version, policy.param

-- Redis time in ms (fractional, microseconds kept).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000

-- The decision (lua/lib/concurrency.lua, loaded ahead of this).
local reply = concurrency_acquire(leases, max_permits, ttl, now, permits,
  app .. '|' .. lease_id .. '|', policy.enabled)
return decided(reply, policy)
