-- The episodes of the policies webhooks watch, kept once for every instance: each
-- instance passes what its last flush saw, and a change of state is answered to the one
-- call that makes it, so N instances report each change once.
--
-- KEYS[1] open episodes: a sorted set of "<webhook> <policy>" scored by when the episode
--         ends if no denial comes (the last denial seen plus the quiet period, in ms);
-- KEYS[2] when each open episode began (a hash of the same members, ms);
-- KEYS[3] the members whose policy is near its limit now (a set).
-- ARGV[1] n, then n pairs: a member that denied since the last call, its quiet period (ms);
-- then m, then m pairs: a member watched for nearing its limit, '1' if it is near now.
-- Returns triples: the change ('denying', 'recovered' or 'near_limit'), the member, and
-- when its episode began (ms; for 'near_limit', now).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}

-- Ended first: an episode whose quiet period passed before this call's denials is over,
-- and those denials begin the next. At most 200 a call, so that no call holds Redis long
-- (the rest end at the next).
local ended = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 200)
for _, member in ipairs(ended) do
  local since = redis.call('HGET', KEYS[2], member)
  redis.call('ZREM', KEYS[1], member)
  redis.call('HDEL', KEYS[2], member)
  out[#out + 1] = 'recovered'
  out[#out + 1] = member
  out[#out + 1] = tonumber(since) or now
end

local i = 2
for _ = 1, tonumber(ARGV[1]) do
  local member, quiet = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  if not redis.call('ZSCORE', KEYS[1], member) then
    redis.call('HSET', KEYS[2], member, now)
    out[#out + 1] = 'denying'
    out[#out + 1] = member
    out[#out + 1] = now
  end
  redis.call('ZADD', KEYS[1], now + quiet, member)
end

local near = tonumber(ARGV[i])
i = i + 1
for _ = 1, near do
  local member, is_near = ARGV[i], ARGV[i + 1]
  i = i + 2
  if is_near == '1' then
    if redis.call('SADD', KEYS[3], member) == 1 then
      out[#out + 1] = 'near_limit'
      out[#out + 1] = member
      out[#out + 1] = now
    end
  else
    redis.call('SREM', KEYS[3], member)
  end
end
return out
