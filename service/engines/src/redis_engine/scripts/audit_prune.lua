-- KEYS: head log ids   ARGV: cutoff_ms batch ids_before_ms
-- Drops the oldest records appended before cutoff_ms, at most batch of them; never
-- the newest (the next record links to it). Returns how many it dropped. The ids of
-- entries appended before ids_before_ms go too: they only guard against an event
-- reported twice, within minutes, and a day is plenty.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
local newest = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
local cutoff = tonumber(ARGV[1])
local dropped = 0
local oldest = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
for i = 1, #oldest, 2 do
  local record = cjson.decode(oldest[i])
  if tonumber(oldest[i + 1]) >= newest or record.at_ms >= cutoff then
    break
  end
  redis.call('ZREM', KEYS[2], oldest[i])
  redis.call('HINCRBY', KEYS[1], 'bytes', -#oldest[i])
  dropped = dropped + 1
end
return dropped
