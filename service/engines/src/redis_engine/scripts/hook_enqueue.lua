-- KEYS: deliveries attempts due queued log owners
-- ARGV: tenant max_queued, then per delivery: id json due_ms created_ms endpoint_id
-- Queues as many as the tenant's queue has room for; a delivery whose id is already
-- there (its event queued again, from an outbox) is not queued twice. Returns how
-- many are there now of those given.
local queued = tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0')
local room = tonumber(ARGV[2]) - queued
local n = 0
local known = 0
local i = 3
while i + 4 <= #ARGV and n < room do
  local id = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], id) == 1 then
    known = known + 1
  else
    redis.call('HSET', KEYS[1], id, ARGV[i + 1])
    redis.call('HSET', KEYS[2], id, 0)
    redis.call('ZADD', KEYS[3], ARGV[i + 2], id)
    redis.call('ZADD', KEYS[5], ARGV[i + 3], id)
    redis.call('HSET', KEYS[6], id, ARGV[1] .. '\t' .. ARGV[i + 4])
    n = n + 1
  end
  i = i + 5
end
if n > 0 then
  redis.call('HINCRBY', KEYS[4], ARGV[1], n)
end
return n + known
