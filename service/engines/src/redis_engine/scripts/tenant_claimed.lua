-- KEYS: tenant_sessions tenant_pending tenant_held tenant_bytes
-- ARGV: session_id time_us tenant_channel message session_now_empty held_until_ms
--       held_ttl_ms size count
-- Everything but the counts may be run again; count '0' leaves them alone.
redis.call('ZADD', KEYS[3], 'GT', ARGV[6], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
if ARGV[9] == '1' then
  if redis.call('DECR', KEYS[2]) <= 0 then
    redis.call('DEL', KEYS[2])
  end
  if redis.call('DECRBY', KEYS[4], ARGV[8]) <= 0 then
    redis.call('DEL', KEYS[4])
  end
end
if ARGV[5] == '1' then
  local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if score and tonumber(score) <= tonumber(ARGV[2]) then
    redis.call('ZREM', KEYS[1], ARGV[1])
  end
end
redis.call('SPUBLISH', ARGV[3], ARGV[4])
