-- KEYS: timers_due timers   ARGV: op(schedule|finish|cancel) id json due_ms
-- schedule: add the timer unless the ask has one. finish: store its progress and
-- next due time (empty: remove it), unless it was cancelled meanwhile. cancel: remove.
local op, id = ARGV[1], ARGV[2]
if op == 'schedule' then
  if redis.call('HSETNX', KEYS[2], id, ARGV[3]) == 1 then
    redis.call('ZADD', KEYS[1], ARGV[4], id)
  end
elseif op == 'finish' and ARGV[4] ~= '' then
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    redis.call('HSET', KEYS[2], id, ARGV[3])
    redis.call('ZADD', KEYS[1], ARGV[4], id)
  end
else
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[1], id)
end
return 'ok'
