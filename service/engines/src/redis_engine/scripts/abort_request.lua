-- KEYS: request
-- ARGV: rpc_id resolved retention_s
-- An Abort by request_id: the rpc_id of its pending ask, 'ended' once it is resolved,
-- or, when no ask is known by it yet, the abort recorded as its outcome (as CLAIM
-- records a resolved ask's), so that REGISTER answers the late Ask with it.
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'P' then
  return {'pending', redis.call('HGET', KEYS[1], 'rpc')}
elseif state == 'D' then
  return {'ended'}
end
redis.call('HSET', KEYS[1], 'state', 'D', 'rpc', ARGV[1], 'resolved', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {'recorded'}
