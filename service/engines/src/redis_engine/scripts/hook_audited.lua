-- KEYS: unaudited unaudited_order   ARGV: ids...
-- Forgets admin changes' audit records that are in the audit log now.
for _, id in ipairs(ARGV) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return 0
