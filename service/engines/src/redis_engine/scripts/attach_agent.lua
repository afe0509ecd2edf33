-- KEYS: agent tenant_agents
-- ARGV: incarnation parent_agent_id holder may_take_over lease_ms agent_id now_ms
--       max_agents
-- A live lease belongs to the subject that attached it: another one may replace it
-- only with may_take_over (the admin role).
local holder = redis.call('HGET', KEYS[1], 'holder')
if holder and holder ~= ARGV[3] and ARGV[4] ~= '1' then
  return {'held'}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[7])
if not redis.call('ZSCORE', KEYS[2], ARGV[6])
    and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[8]) then
  return {'full'}
end
local previous = redis.call('HGET', KEYS[1], 'inc') or ''
redis.call('HSET', KEYS[1], 'inc', ARGV[1], 'parent', ARGV[2], 'holder', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], tonumber(ARGV[7]) + tonumber(ARGV[5]), ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return {'attached', previous}
