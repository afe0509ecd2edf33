-- KEYS: settled asks barrier
-- ARGV: rpc_id
-- How the ask ended (its encoded `Resolved`, or '' if not recorded) and whether it is
-- pending, read after a write of this script's own: the WAIT sent after this script
-- covers that write, and with it every write before it on this primary, the outcome's
-- among them.
redis.call('SET', KEYS[3], '1', 'PX', 60000)
local settled = redis.call('HGET', KEYS[1], ARGV[1] .. ' r') or ''
local pending = redis.call('HEXISTS', KEYS[2], ARGV[1])
return {settled, pending}
