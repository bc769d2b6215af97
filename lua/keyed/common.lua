-- The arguments every keyed acquire script takes, read once. A keyed (per_app or per_key)
-- policy has one bucket per caller, spread over a cluster's masters by its own hash tag:
-- its script cannot read the policy's hash, so the instance passes the policy's config
-- (from its snapshot of SQL, overrides applied) with every call.
--
-- KEYS[1]  the caller's bucket, <prefix>:k:{<hash of policy, generation and caller>}
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  max_permits (integer >= 1)
-- ARGV[3]  the algorithm's parameter: rate (permits per second, fractional, > 0), or
--          window_ms, or lease_ttl_ms (integers >= 1)
-- ARGV[4]  enabled ("1"/"0"; "0" also reads a bucket's state without writing anything)
-- ARGV[5]  the policy's version (echoed in the reply)
-- ARGV[6]  for sliding_log a request id unique to the call; for concurrency the lease
--          members' prefix "<app>|<lease id>|"
--
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  1 granted; -1 denied (nothing consumed); 2 granted unenforced (nothing written);
--        -3 permits not a whole number from 1 to max_permits.
-- Every bucket key carries a TTL: it goes once idle long enough to be full (or empty)
-- again, so Redis holds the callers active now, not every caller ever seen.
local bucket = KEYS[1]
local permits = tonumber(ARGV[1])
local max_permits = tonumber(ARGV[2])
local param = tonumber(ARGV[3])
local enabled = ARGV[4] ~= '0'
local version = tonumber(ARGV[5]) or 0
local extra = ARGV[6] or ''

if not permits or permits < 1 or permits > max_permits or permits ~= math.floor(permits) then
  return {-3, 0, 0, 0, max_permits, version}
end

local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = now_us / 1000

-- The reply with the policy's figures added.
local function finish(reply)
  reply[5] = max_permits
  reply[6] = version
  return reply
end

