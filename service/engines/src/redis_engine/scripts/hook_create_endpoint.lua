-- KEYS: endpoints unaudited unaudited_order unaudited_seq
-- ARGV: id endpoint_json max_endpoints audit_id audit_json
-- An endpoint, under the tenant's cap, with the change's audit record kept until it
-- is in the audit log.
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return 'full'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[4])
return 'ok'
