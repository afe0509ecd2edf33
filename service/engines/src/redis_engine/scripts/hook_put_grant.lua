-- KEYS: grants grants_version unaudited unaudited_order unaudited_seq
-- ARGV: id grant_json now_ms max audit_id audit_json
-- Adds a standing grant, first dropping the tenant's grants that expired by now_ms;
-- "full" when the tenant holds max already. Keeps the change's audit record until it
-- is in the audit log, and counts the change on the version.
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if cjson.decode(all[i + 1]).expires_ms <= tonumber(ARGV[3]) then
    redis.call('HDEL', KEYS[1], all[i])
  end
end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  return 'full'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[5], ARGV[6])
redis.call('ZADD', KEYS[4], redis.call('INCR', KEYS[5]), ARGV[5])
return 'ok'
