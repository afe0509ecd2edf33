-- KEYS: timers_due timers   ARGV: now_ms lease_until_ms limit
-- Hands out due timers, each due again when its lease ends.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local json = redis.call('HGET', KEYS[2], id)
  if json then
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    table.insert(out, json)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
