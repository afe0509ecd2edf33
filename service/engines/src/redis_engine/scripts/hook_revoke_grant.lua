-- KEYS: grants grants_version unaudited unaudited_order unaudited_seq
-- ARGV: id audit_id audit_json
-- Ends a grant; when it was there, counts the change on the version and keeps the
-- change's audit record until it is in the audit log. 1 when it was there.
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[2])
return 1
