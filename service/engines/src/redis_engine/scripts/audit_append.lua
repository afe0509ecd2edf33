-- KEYS: head log ids
-- ARGV: expected_seq expected_hash now_ms max_bytes then (id seq hash record_json)...
-- Appends records chained to the head the node expected (the last one it saw), unless
-- the head moved (another node appended) or one of the entries is appended already
-- (an event reported twice): then nothing, and the head as it is with, per entry, 1
-- when it is appended already, for the node to chain again. The head counts the bytes
-- the log's records hold; past max_bytes the oldest records go (never the newest: the
-- next record links to it), down to nine tenths of it. The ids older than a day go
-- with the retention sweep (AUDIT_PRUNE).
local head = redis.call('HMGET', KEYS[1], 'seq', 'hash', 'bytes')
local seq, hash = head[1] or '0', head[2] or ''
local refused = seq ~= ARGV[1] or hash ~= ARGV[2]
local flags = {}
for i = 5, #ARGV, 4 do
  if redis.call('ZSCORE', KEYS[3], ARGV[i]) then
    flags[#flags + 1] = 1
    refused = true
  else
    flags[#flags + 1] = 0
  end
end
if refused then
  return { 0, seq, hash, unpack(flags) }
end
local now = tonumber(ARGV[3])
local last_seq, last_hash
local bytes = tonumber(head[3] or '0')
for i = 5, #ARGV, 4 do
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i + 3])
  redis.call('ZADD', KEYS[3], now, ARGV[i])
  last_seq, last_hash = ARGV[i + 1], ARGV[i + 2]
  bytes = bytes + #ARGV[i + 3]
end
redis.call('HSET', KEYS[1], 'seq', last_seq, 'hash', last_hash, 'bytes', bytes)
local max = tonumber(ARGV[4])
if bytes > max then
  local target = math.floor(max / 10) * 9
  while bytes > target and redis.call('ZCARD', KEYS[2]) > 1 do
    local oldest = redis.call('ZPOPMIN', KEYS[2])
    bytes = redis.call('HINCRBY', KEYS[1], 'bytes', -#oldest[1])
  end
end
return { 1 }
