-- wrk script: POST /v1/acquire for one permit of a per_key policy, walking N keys in
-- order (each key its own bucket in Redis).
--
-- Arguments after `--`: the resource, N, the keys' prefix (keys are <prefix>0 ..
-- <prefix>N-1) and where each thread starts: a comma-separated list of positions, one
-- per wrk thread (so as many as -t; "0,0" for a first run with -t2).
--
-- Thread t of T owns the keys t, t+T, t+2T, ... below N (its share) and walks them in
-- order, wrapping, from its start position. The threads never hand out the same key, and
-- none repeats a key before its share is done, so the keys seen are counted, not
-- estimated. At the end, done() prints one line per thread:
--   walk thread=<t> share=<keys in its share> walked=<keys handed out> next=<position>
-- and a run started at the `next` positions goes on where this one stopped
-- (bench/acquire.sh does that across its rounds). Each thread builds the requests of its
-- own share once, in init(), so a request costs wrk a table lookup, as in acquire_many.lua.
--
-- Usage (bench/acquire.sh runs it like this):
--   wrk -t2 -c64 -d10s --latency -H "Authorization: Bearer $KEY" \
--       -s bench/acquire_keyed.lua http://127.0.0.1:PORT/v1/acquire -- users 100000 u 0,0

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

-- setup() runs in the main Lua state once per thread, before that thread's init().
local threads = {}
function setup(thread)
  thread:set("thread_id", #threads)
  table.insert(threads, thread)
end

local requests = {}
local position = 0 -- 0-based index, in the thread's share, of the next key to hand out
-- Calls of request() that hand out the current key without moving on. wrk 4 calls
-- request() once on the first thread's state before the run, to check the request, and
-- never sends that one: the first thread hands its first key out twice, so that the key
-- is sent all the same (twice, were there no such call).
local hold = 0

-- Globals, so that done() can read them with thread:get().
share_size = 0
walked = 0
next_position = 0

local function fail(message)
  io.stderr:write("acquire_keyed.lua: " .. message .. "\n")
  os.exit(2)
end

function init(args)
  local resource = args[1] or "users"
  local count = math.floor(tonumber(args[2]) or 0)
  local prefix = args[3] or "u"
  local starts = {}
  for field in string.gmatch(args[4] or "", "[^,]+") do
    table.insert(starts, math.floor(tonumber(field) or 0))
  end
  -- thread_id is the global setup() set through thread:set().
  local t, stride = thread_id, #starts
  if count < 1 then
    fail("N must be a positive number of keys")
  end
  if t >= stride then
    fail("give one start position per wrk thread (e.g. 0,0 for -t2)")
  end
  if t >= count then
    fail("more wrk threads than keys")
  end
  for i = t, count - 1, stride do
    requests[#requests + 1] = wrk.format(nil, nil, nil,
      string.format('{"resource":"%s","permits":1,"key":"%s%d"}', resource, prefix, i))
  end
  share_size = #requests
  position = starts[t + 1] % share_size
  next_position = position
  if t == 0 then
    hold = 1
  end
end

function request()
  local r = requests[position + 1]
  if hold > 0 then
    hold = hold - 1
  else
    position = position + 1
    if position == share_size then
      position = 0
    end
    walked = walked + 1
    next_position = position
  end
  return r
end

function done(summary, latency, requests)
  for _, thread in ipairs(threads) do
    io.write(string.format("walk thread=%d share=%d walked=%d next=%d\n",
      thread:get("thread_id"), thread:get("share_size"), thread:get("walked"),
      thread:get("next_position")))
  end
end
