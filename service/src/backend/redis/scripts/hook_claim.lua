-- KEYS: due deliveries attempts   ARGV: now_ms lease_until_ms limit
-- Hands out due deliveries: each is due again when its lease ends (a survivor takes
-- it then if its node died) and its attempts count goes up (an outcome recorded with
-- an older count is dropped). Returns json, attempts pairs.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local json = redis.call('HGET', KEYS[2], id)
  if json then
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    table.insert(out, json)
    table.insert(out, redis.call('HINCRBY', KEYS[3], id, 1))
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
