-- KEYS: due deliveries queued finished   ARGV: id json now_ms tenant max_queued
-- Makes a delivery pending again, due now; a finished one takes a place in the
-- tenant's queue again.
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return 'missing'
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if tonumber(redis.call('HGET', KEYS[3], ARGV[4]) or '0') >= tonumber(ARGV[5]) then
    return 'full'
  end
  redis.call('HINCRBY', KEYS[3], ARGV[4], 1)
  redis.call('ZREM', KEYS[4], ARGV[1])
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 'ok'
