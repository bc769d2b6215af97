-- Token bucket with trigger refill: the acquire decision of one global policy (one bucket
-- for every caller), taken atomically. The decision itself is lua/lib/token_bucket.lua.
--
-- KEYS[1]  the policy's hash, <prefix>:{<policy name>}
-- ARGV[1]  permits asked for (integer >= 1)
-- ARGV[2]  the calling application's slug
--
-- Hash fields. Config, written only by sync_policy.lua: max_permits, rate (permits per
-- second, fractional), apps (",slug1,slug2,"), enabled ("1"/"0"), version, created_ms.
-- State, written only here: curr_permits (fractional), last_mill_second (ms, fractional).
--
-- Reply: {code, remaining, retry_after_ms, reset_after_ms, max_permits, version}
--   code  one of the table REPLY (defined ahead of this script from the Rust side's reply
--        codes, crates/limiter/src/decide/reply.rs): GRANTED; DENIED (nothing consumed);
--        NO_SUCH_POLICY (or a keyed one); APP_NOT_ALLOWED; PERMITS_REFUSED (permits not a
--        whole number from 1 to max_permits); UNENFORCED (policy disabled, bucket
--        untouched); SHADOW_DENIED (hash field mode = shadow, where it would have been
--        denied; nothing consumed, as for DENIED); WRONG_ALGORITHM (hash field
--        `algorithm`, missing means token_bucket): {WRONG_ALGORITHM, index, 0, 0, 0,
--        version} with its number in ALGORITHM_INDEX (0 unknown)
--
-- ALGORITHM_INDEX (algorithm name -> number, for the WRONG_ALGORITHM reply) is defined
-- ahead of this script when it is loaded (crates/limiter/src/client/scripts.rs, from the
-- Rust side's Algorithm::index). The gate: lib/acquire_gate.lua's policy_gate; the
-- decision: lib/token_bucket_global.lua (shared with acquire_batch.lua), on
-- lib/token_bucket.lua, all loaded ahead of this.
local key = KEYS[1]
local h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
local code, remaining, retry, reset, max_permits, version, tokens, last = token_bucket_global(h,
  tonumber(ARGV[1]), ARGV[2], redis_now_us() / 1000)
if tokens then
  store_token_bucket(key, tokens, last)
end
return {code, remaining, retry, reset, max_permits, version}
