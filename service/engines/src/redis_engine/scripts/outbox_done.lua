-- KEYS: (outbox outbox_data outbox_index) per session
-- ARGV: per session: outbox_member count id...
-- The deliveries of these events are queued: they leave their session's outbox, and a
-- session whose outbox is then empty leaves its slot's index (else the index keeps the
-- time of its oldest event left). Several sessions at once on one Redis; on a cluster,
-- one (their keys live in its slot).
local at = 1
for k = 1, #KEYS, 3 do
  local member, count = ARGV[at], tonumber(ARGV[at + 1])
  for i = at + 2, at + 1 + count do
    redis.call('ZREM', KEYS[k], ARGV[i])
    redis.call('HDEL', KEYS[k + 1], ARGV[i], ARGV[i] .. ' a')
  end
  at = at + 2 + count
  local oldest = redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')
  if #oldest == 0 then
    redis.call('ZREM', KEYS[k + 2], member)
  else
    redis.call('ZADD', KEYS[k + 2], 'XX', oldest[2], member)
  end
end
return 1
