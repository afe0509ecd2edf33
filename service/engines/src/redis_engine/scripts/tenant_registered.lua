-- KEYS: tenant_sessions tenant_pending tenant_held tenant_bytes
-- ARGV: session_id time_us tenant_channel message session_now_empty held_until_ms
--       held_ttl_ms size count
-- Everything but the counts may be run again (a retry after a failure that leaves
-- unknown whether it ran): count '0' leaves the pending count and bytes alone.
redis.call('ZADD', KEYS[3], 'GT', ARGV[6], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
if ARGV[9] == '1' then
  redis.call('INCR', KEYS[2])
  redis.call('INCRBY', KEYS[4], ARGV[8])
end
redis.call('SPUBLISH', ARGV[3], ARGV[4])
