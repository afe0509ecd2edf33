-- KEYS: people identities unaudited unaudited_order unaudited_seq
-- ARGV: id person_json max_people audit_id audit_json identity...
-- A person, added or in place of the one with their id, unless an identity of theirs
-- is another person's ({'taken', index, holder}) or the tenant is full ({'full'}); the
-- change's audit record kept until it is in the audit log.
for i = 6, #ARGV do
  local holder = redis.call('HGET', KEYS[2], ARGV[i])
  if holder and holder ~= ARGV[1] then
    return {'taken', tostring(i - 6), holder}
  end
end
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return {'full'}
end
if old then
  for _, identity in ipairs(cjson.decode(old).identities) do
    redis.call('HDEL', KEYS[2], identity)
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
for i = 6, #ARGV do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
end
redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[4])
return {'ok'}
