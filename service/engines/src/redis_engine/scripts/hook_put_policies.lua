-- KEYS: policies unaudited unaudited_order unaudited_seq
-- ARGV: record_json audit_id audit_json
-- Replaces a tenant's policy set: its version counts the puts, its record is kept
-- beside it, and the change's audit record is kept until it is in the audit log.
-- The new version.
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
redis.call('HSET', KEYS[1], 'record', ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[2])
return version
