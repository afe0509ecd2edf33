-- KEYS: due deliveries attempts queued log finished owners
-- ARGV: id attempts json status(P|D|F) next_ms finished_ms tenant keep_finished
-- The outcome of an attempt, unless the delivery was handed out again since (its
-- attempts moved on) or is no longer pending. A finished delivery leaves the queue;
-- the tenant keeps its newest `keep_finished` finished ones.
if tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '-1') ~= tonumber(ARGV[2]) then
  return 0
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if ARGV[4] == 'P' then
  redis.call('ZADD', KEYS[1], ARGV[5], ARGV[1])
  return 1
end
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('HINCRBY', KEYS[4], ARGV[7], -1) <= 0 then
  redis.call('HDEL', KEYS[4], ARGV[7])
end
redis.call('ZADD', KEYS[6], ARGV[6], ARGV[1])
local extra = redis.call('ZCARD', KEYS[6]) - tonumber(ARGV[8])
if extra > 0 then
  local old = redis.call('ZPOPMIN', KEYS[6], extra)
  for i = 1, #old, 2 do
    redis.call('HDEL', KEYS[2], old[i])
    redis.call('HDEL', KEYS[3], old[i])
    redis.call('HDEL', KEYS[7], old[i])
    redis.call('ZREM', KEYS[5], old[i])
  end
end
return 1
