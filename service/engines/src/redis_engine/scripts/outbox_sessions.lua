-- KEYS: outbox_index
-- ARGV: stale_before_ms now_ms limit
-- Sessions whose outbox holds an event not queued since stale_before (its node died,
-- or failed to queue it): handed to this sweeper, touched now so that no other sweeper
-- takes them before they are stale again.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], member)
end
return due
