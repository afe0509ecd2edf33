-- KEYS: head log ids
-- ARGV: expected_seq expected_hash now_ms max_bytes then (id seq hash record_json)...
-- Appends records chained to the head the node read, unless another node appended
-- meanwhile: then nothing, and the head as it is now (the node chains again). The
-- head counts the bytes the log's records hold; past max_bytes the oldest records go
-- (never the newest: the next record links to it), down to nine tenths of it.
local head = redis.call('HMGET', KEYS[1], 'seq', 'hash')
if (head[1] or '0') ~= ARGV[1] or (head[2] or '') ~= ARGV[2] then
  return { 0, head[1] or '0', head[2] or '' }
end
local now = tonumber(ARGV[3])
local last_seq, last_hash
local added = 0
for i = 5, #ARGV, 4 do
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i + 3])
  redis.call('ZADD', KEYS[3], now, ARGV[i])
  last_seq, last_hash = ARGV[i + 1], ARGV[i + 2]
  added = added + #ARGV[i + 3]
end
if last_seq then
  redis.call('HSET', KEYS[1], 'seq', last_seq, 'hash', last_hash)
end
local bytes = redis.call('HINCRBY', KEYS[1], 'bytes', added)
local max = tonumber(ARGV[4])
if bytes > max then
  local target = math.floor(max / 10) * 9
  while bytes > target and redis.call('ZCARD', KEYS[2]) > 1 do
    local oldest = redis.call('ZPOPMIN', KEYS[2])
    bytes = redis.call('HINCRBY', KEYS[1], 'bytes', -#oldest[1])
  end
end
-- Ids only guard against an event reported twice, within minutes: a day is plenty.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - 86400000)
return { 1 }
