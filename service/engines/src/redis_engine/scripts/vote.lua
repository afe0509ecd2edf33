-- KEYS: asks votes settled   ARGV: rpc_id expected new ttl_ms
-- The votes of a pending quorum ask, replaced by `new` only if they are still
-- `expected` (the node tallies; another node that voted meanwhile makes it tally
-- again). 'gone' (with how it ended, when known) once the ask is not pending.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return {'gone', redis.call('HGET', KEYS[3], ARGV[1]) or ''}
end
local current = redis.call('GET', KEYS[2]) or ''
if current ~= ARGV[2] then
  return {'moved', current}
end
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return {'ok'}
