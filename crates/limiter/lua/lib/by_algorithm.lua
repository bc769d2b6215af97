-- Every algorithm's acquire and give-back by its number in ALGORITHM_INDEX, for the scripts
-- that take requests of any algorithm (acquire_batch.lua, acquire_all.lua, give_back.lua).
-- Loaded after every algorithm's library; it only defines tables, which an EVALSHA script
-- builds at every call and the function library (src/client/functions.rs) once.
--
-- ACQUIRE_GLOBAL, ACQUIRE_KEYED      an acquire (lua/lib/<algorithm>.lua's _global and
--                                    _keyed, with the order of arguments of lib/keyed.lua
--                                    and lib/acquire_gate.lua)
-- GIVE_BACK_GLOBAL, GIVE_BACK_KEYED  a give-back
-- WITH_STATE_KEY                     the global algorithms with a state key beside the
--                                    policy's hash (the request's second key)
local ACQUIRE_GLOBAL = {
  [ALGORITHM_INDEX.token_bucket] = token_bucket_acquire_global,
  [ALGORITHM_INDEX.fixed_window] = fixed_window_global,
  [ALGORITHM_INDEX.sliding_log] = sliding_log_global,
  [ALGORITHM_INDEX.sliding_window] = sliding_window_global,
  [ALGORITHM_INDEX.concurrency] = concurrency_global,
  [ALGORITHM_INDEX.gcra] = gcra_global,
}
local ACQUIRE_KEYED = {
  [ALGORITHM_INDEX.token_bucket] = token_bucket_keyed,
  [ALGORITHM_INDEX.fixed_window] = fixed_window_keyed,
  [ALGORITHM_INDEX.sliding_log] = sliding_log_keyed,
  [ALGORITHM_INDEX.sliding_window] = sliding_window_keyed,
  [ALGORITHM_INDEX.concurrency] = concurrency_keyed,
  [ALGORITHM_INDEX.gcra] = gcra_keyed,
}
local GIVE_BACK_GLOBAL = {
  [ALGORITHM_INDEX.token_bucket] = token_bucket_give_back_global,
  [ALGORITHM_INDEX.fixed_window] = fixed_window_give_back_global,
  [ALGORITHM_INDEX.sliding_log] = sliding_log_give_back_global,
  [ALGORITHM_INDEX.sliding_window] = sliding_window_give_back_global,
  [ALGORITHM_INDEX.concurrency] = concurrency_give_back_global,
  [ALGORITHM_INDEX.gcra] = gcra_give_back_global,
}
local GIVE_BACK_KEYED = {
  [ALGORITHM_INDEX.token_bucket] = token_bucket_give_back_keyed,
  [ALGORITHM_INDEX.fixed_window] = fixed_window_give_back_keyed,
  [ALGORITHM_INDEX.sliding_log] = sliding_log_give_back_keyed,
  [ALGORITHM_INDEX.sliding_window] = sliding_window_give_back_keyed,
  [ALGORITHM_INDEX.concurrency] = concurrency_give_back_keyed,
  [ALGORITHM_INDEX.gcra] = gcra_give_back_keyed,
}
local WITH_STATE_KEY = {
  [ALGORITHM_INDEX.token_bucket] = true,
  [ALGORITHM_INDEX.fixed_window] = true,
  [ALGORITHM_INDEX.sliding_log] = true,
  [ALGORITHM_INDEX.concurrency] = true,
}
