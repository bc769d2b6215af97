-- wrk script: POST /v1/acquire for one resource, the same request every time.
--
-- Arguments after `--`: the resource (default "hot") and the permits (default 1).
-- The request is static (no request() function), the cheapest kind for wrk.
--
-- Usage (bench/acquire.sh runs it like this):
--   wrk -t2 -c64 -d10s --latency -H "Authorization: Bearer $KEY" \
--       -s bench/acquire_one.lua http://127.0.0.1:PORT/v1/acquire -- hot 1

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function init(args)
  local resource = args[1] or "hot"
  local permits = math.floor(tonumber(args[2]) or 1)
  wrk.body = string.format('{"resource":"%s","permits":%d}', resource, permits)
end
