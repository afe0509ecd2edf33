-- KEYS: head log ids   ARGV: expected_seq expected_hash now_ms then (id seq hash record_json)...
-- Appends records chained to the head the node read, unless another node appended
-- meanwhile: then nothing, and the head as it is now (the node chains again).
local head = redis.call('HMGET', KEYS[1], 'seq', 'hash')
if (head[1] or '0') ~= ARGV[1] or (head[2] or '') ~= ARGV[2] then
  return { 0, head[1] or '0', head[2] or '' }
end
local now = tonumber(ARGV[3])
local last_seq, last_hash
for i = 4, #ARGV, 4 do
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i + 3])
  redis.call('ZADD', KEYS[3], now, ARGV[i])
  last_seq, last_hash = ARGV[i + 1], ARGV[i + 2]
end
if last_seq then
  redis.call('HSET', KEYS[1], 'seq', last_seq, 'hash', last_hash)
end
-- Ids only guard against an event reported twice, within minutes: a day is plenty.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 86400000)
return { 1 }
