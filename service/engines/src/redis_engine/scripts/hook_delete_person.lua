-- KEYS: people identities unaudited unaudited_order unaudited_seq
-- ARGV: id audit_id audit_json
-- Removes a person and their identities; when they were there, keeps the change's
-- audit record until it is in the audit log. 1 when they were there.
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then
  return 0
end
for _, identity in ipairs(cjson.decode(old).identities) do
  redis.call('HDEL', KEYS[2], identity)
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[2])
return 1
