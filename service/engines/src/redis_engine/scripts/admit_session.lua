-- KEYS: tenant_held   ARGV: session_id now_ms held_until_ms max_sessions held_ttl_ms
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if not redis.call('ZSCORE', KEYS[1], ARGV[1])
    and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'GT', ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
