-- wrk script: POST /v1/acquire for one permit of a random policy among N.
--
-- The policies are named <prefix>0 .. <prefix>N-1 (defaults: N = 10000, prefix "p").
-- Every request is built once per thread in init(), so the random pick costs one table
-- lookup per request and wrk stays as cheap as with a static request.
--
-- Usage (bench/acquire.sh runs it like this):
--   wrk -t2 -c64 -d10s --latency -H "Authorization: Bearer $KEY" \
--       -s bench/acquire_many.lua http://127.0.0.1:PORT/v1/acquire -- 10000 p

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

-- setup() runs in the main Lua state once per thread: give each thread its own id so
-- the threads do not draw the same sequence of resources.
local next_thread_id = 0
function setup(thread)
  thread:set("thread_id", next_thread_id)
  next_thread_id = next_thread_id + 1
end

local requests = {}
local count = 0

function init(args)
  count = math.floor(tonumber(args[1]) or 10000)
  if count < 1 then
    count = 1
  end
  local prefix = args[2] or "p"
  -- thread_id is the global set by setup() through thread:set().
  math.randomseed(os.time() + 7919 * (thread_id or 0))
  for i = 0, count - 1 do
    requests[i + 1] = wrk.format(nil, nil, nil,
      string.format('{"resource":"%s%d","permits":1}', prefix, i))
  end
end

function request()
  return requests[math.random(count)]
end
