-- KEYS: outbox outbox_data outbox_index
-- ARGV: stale_before_ms now_ms limit outbox_member
-- The session's outbox events not queued since stale_before, oldest first, touched now:
-- id, event, and the ask a resolved event ended ('' for a requested one), for each.
-- A session whose outbox is empty (its events queued meanwhile, or gone with an
-- outbox that expired) leaves the index.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[2], id)
  local event = redis.call('HGET', KEYS[2], id)
  if event then
    out[#out + 1] = id
    out[#out + 1] = event
    out[#out + 1] = redis.call('HGET', KEYS[2], id .. ' a') or ''
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[3], ARGV[4])
end
return out
