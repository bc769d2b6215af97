-- wrk script: POST /v1/acquire for one permit of a per_key policy, with a random key
-- among N (each key its own bucket in Redis).
--
-- Arguments after `--`: the resource (default "users"), N (default 100000) and the keys'
-- prefix (default "u"): keys are <prefix>0 .. <prefix>N-1. Every request is built once
-- per thread in init(), so a request costs wrk one table lookup, as in acquire_many.lua.
--
-- Usage (bench/acquire.sh runs it like this):
--   wrk -t2 -c64 -d10s --latency -H "Authorization: Bearer $KEY" \
--       -s bench/acquire_keyed.lua http://127.0.0.1:PORT/v1/acquire -- users 100000 u

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

local next_thread_id = 0
function setup(thread)
  thread:set("thread_id", next_thread_id)
  next_thread_id = next_thread_id + 1
end

local requests = {}
local count = 0

function init(args)
  local resource = args[1] or "users"
  count = math.floor(tonumber(args[2]) or 100000)
  if count < 1 then
    count = 1
  end
  local prefix = args[3] or "u"
  -- thread_id is the global set by setup() through thread:set().
  math.randomseed(os.time() + 7919 * (thread_id or 0))
  for i = 0, count - 1 do
    requests[i + 1] = wrk.format(nil, nil, nil,
      string.format('{"resource":"%s","permits":1,"key":"%s%d"}', resource, prefix, i))
  end
end

function request()
  return requests[math.random(count)]
end
