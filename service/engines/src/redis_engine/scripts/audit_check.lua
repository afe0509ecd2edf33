-- KEYS: head ids   ARGV: id...
-- The tenant's chain head (seq, hash) and, per id, 1 when its entry is appended already.
local head = redis.call('HMGET', KEYS[1], 'seq', 'hash')
local reply = { head[1] or '0', head[2] or '' }
for i = 1, #ARGV do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    reply[#reply + 1] = 1
  else
    reply[#reply + 1] = 0
  end
end
return reply
