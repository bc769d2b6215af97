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
--   code  1 granted; -1 denied (nothing consumed); 0 no such policy (or a keyed one);
--        -2 app not allowed;
--        -3 permits above max_permits; 2 granted unenforced (policy disabled, bucket untouched);
--        3 granted in shadow mode (hash field mode = shadow) where it would have been denied
--        (nothing consumed, as for -1);
--        -4 the policy uses another algorithm (hash field `algorithm`, missing means
--        token_bucket): {-4, index, 0, 0, 0, version} with its number in ALGORITHM_INDEX
--        (0 unknown)
--
-- ALGORITHM_INDEX (algorithm name -> number, for the -4 reply) is defined ahead of this
-- script when it is loaded (src/limiter/scripts.rs, from the Rust side's Algorithm::index).
-- The decision: lib/token_bucket_global.lua (shared with acquire_batch.lua), on
-- lib/token_bucket.lua, both loaded ahead of this.
local key = KEYS[1]
local h = redis.call('HMGET', key, unpack(TOKEN_BUCKET_FIELDS))
local code, remaining, retry, reset, max_permits, version, tokens, last = token_bucket_global(h,
  tonumber(ARGV[1]), ARGV[2], redis_now_us() / 1000)
if tokens then
  store_token_bucket(key, tokens, last)
end
return {code, remaining, retry, reset, max_permits, version}
