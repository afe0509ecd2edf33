-- KEYS: outbox outbox_data outbox_index
-- ARGV: outbox_member id...
-- The deliveries of these events are queued: they leave the session's outbox, and the
-- session leaves its slot's index once its outbox is empty (else the index keeps the
-- time of its oldest event left).
for i = 2, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('HDEL', KEYS[2], ARGV[i], ARGV[i] .. ' a')
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #oldest == 0 then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  redis.call('ZADD', KEYS[3], 'XX', oldest[2], ARGV[1])
end
return 1
