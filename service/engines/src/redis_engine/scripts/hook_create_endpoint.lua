-- KEYS: endpoints   ARGV: id endpoint_json max_endpoints
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return 'full'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 'ok'
