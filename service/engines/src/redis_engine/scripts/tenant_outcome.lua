-- KEYS: tenant_pending_bytes tenant_outcome_bytes tenant_outcomes
-- ARGV: mode now_ms bytes expires_ms id max_bytes
-- A recorded outcome's bytes on the tenant's budget when its session's script cannot
-- reach the tenant's keys (a Redis Cluster), or before one is recorded (an Abort by an
-- unknown request_id). mode 'hold': counted, never refused (the ask is resolved
-- already); 'admit': counted only if it fits ('tenant_bytes_full' otherwise);
-- 'release': not recorded after all, uncounted.
if ARGV[1] == 'release' then
  if redis.call('ZREM', KEYS[3], ARGV[3] .. ' ' .. ARGV[5]) == 1
      and redis.call('DECRBY', KEYS[2], ARGV[3]) <= 0 then
    redis.call('DEL', KEYS[2])
  end
  return 'ok'
end
sweep_outcomes(KEYS[2], KEYS[3], ARGV[2])
if ARGV[1] == 'admit' and tonumber(redis.call('GET', KEYS[1]) or '0') + outcome_bytes(KEYS[2])
    + tonumber(ARGV[3]) > tonumber(ARGV[6]) then
  return 'tenant_bytes_full'
end
hold_outcome(KEYS[2], KEYS[3], ARGV[3], ARGV[4], ARGV[5])
return 'ok'
