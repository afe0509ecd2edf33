-- KEYS: tenant_pending tenant_held tenant_bytes tenant_outcome_bytes tenant_outcomes
-- ARGV: session_id now_ms held_until_ms max_sessions held_ttl_ms max_pending size
--       max_bytes
-- The byte budget holds the pending asks and the outcomes kept for retries.
sweep_outcomes(KEYS[4], KEYS[5], ARGV[2])
if tonumber(redis.call('GET', KEYS[1]) or '0') >= tonumber(ARGV[6]) then
  return 'tenant_full'
end
if tonumber(redis.call('GET', KEYS[3]) or '0') + outcome_bytes(KEYS[4]) + tonumber(ARGV[7])
    > tonumber(ARGV[8]) then
  return 'tenant_bytes_full'
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
if not redis.call('ZSCORE', KEYS[2], ARGV[1])
    and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return 'sessions_full'
end
redis.call('ZADD', KEYS[2], 'GT', ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 'ok'
