-- KEYS: endpoints unaudited unaudited_order unaudited_seq
-- ARGV: id audit_id audit_json
-- Removes an endpoint; when it was there, keeps the change's audit record until it is
-- in the audit log. 1 when it was there.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[2])
return 1
