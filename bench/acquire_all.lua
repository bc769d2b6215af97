-- wrk script: POST /v1/acquire of all of several resources in one call (all or nothing),
-- the same request every time.
--
-- Arguments after `--`: the resources (default "hot hot2"), one permit each.
-- The request is static (no request() function), the cheapest kind for wrk.
--
-- Usage (the bench binary runs it like this):
--   wrk -t2 -c64 -d10s --latency -H "Authorization: Bearer $KEY" \
--       -s bench/acquire_all.lua http://127.0.0.1:PORT/v1/acquire -- hot hot2

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function init(args)
  local items = {}
  for i = 1, math.max(#args, 0) do
    items[#items + 1] = string.format('{"resource":"%s"}', args[i])
  end
  if #items == 0 then
    items = {'{"resource":"hot"}', '{"resource":"hot2"}'}
  end
  wrk.body = '{"all":[' .. table.concat(items, ",") .. ']}'
end
