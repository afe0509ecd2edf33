-- KEYS: due deliveries queued finished unaudited unaudited_order unaudited_seq
-- ARGV: id json now_ms tenant max_queued audit_id audit_json
-- Makes a delivery pending again, due now; a finished one takes a place in the
-- tenant's queue again. The change's audit record is kept until it is in the log.
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
redis.call('HSET', KEYS[5], ARGV[6], ARGV[7])
redis.call('ZADD', KEYS[6], redis.call('INCR', KEYS[7]), ARGV[6])
return 'ok'
