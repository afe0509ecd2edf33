-- KEYS: asks order rids events head epoch settled
--       [tenant_sessions tenant_pending tenant_held]
-- ARGV: rpc_id resolved settled_text history_len retention_s channel request_key_prefix
--       tenant_channel session_id idle_ttl_s publish_command wait_mark now_ms
--       settled_order session_bytes tenant_bytes
--       outbox outbox_data outbox_index outbox_member (or four '') votes
--       history_bytes_key max_history_bytes tenant_outcome_bytes tenant_outcomes
-- An outcome recorded for retries counts against the tenant's byte budget until it
-- expires: here with the tenant's keys, else by the node after (TENANT_OUTCOME); the
-- reply says how many bytes it holds.
-- Without the tenant's keys, the node does the tenant's part after (TENANT_CLAIMED).
-- The wait mark and the settled order share the session's hash tag, so they live in
-- this slot. With an outbox, the event (and the ask it ended) goes into the session's
-- outbox in the same step, as in REGISTER.
local tenant = KEYS[8] ~= nil
local asked = redis.call('HGET', KEYS[1], ARGV[1])
if not asked then
  return {'gone', redis.call('HGET', KEYS[7], ARGV[1]) or ''}
end
redis.call('HDEL', KEYS[1], ARGV[1])
-- Its wait mark goes, and a quorum ask's votes with it.
if ARGV[21] and ARGV[21] ~= '' then
  redis.call('DEL', ARGV[12], ARGV[21])
else
  redis.call('DEL', ARGV[12])
end
redis.call('ZREM', KEYS[2], ARGV[1])
-- The tenant's count goes when it reaches zero, like its set of sessions; so do the
-- byte counters (an ask registered before they were kept counts nothing).
if tenant and redis.call('DECR', KEYS[9]) <= 0 then
  redis.call('DEL', KEYS[9])
end
if redis.call('DECRBY', ARGV[15], #asked) <= 0 then
  redis.call('DEL', ARGV[15])
end
if tenant and redis.call('DECRBY', ARGV[16], #asked) <= 0 then
  redis.call('DEL', ARGV[16])
end
local seq = redis.call('INCR', KEYS[5])
local epoch = redis.call('GET', KEYS[6]) or ''
local event = 'R' .. ARGV[2]
append_history(KEYS[4], ARGV[22], event, tonumber(ARGV[4]), tonumber(ARGV[23]), ARGV[10])
redis.call('HSET', KEYS[7], ARGV[1], ARGV[3], ARGV[1] .. ' r', ARGV[2])
redis.call('EXPIRE', KEYS[7], ARGV[5])
-- The session remembers how its last history_len asks ended, as its history does: a
-- busy session's settled hash would otherwise grow for as long as it stays busy.
local remembered = redis.call('RPUSH', ARGV[14], ARGV[1])
while remembered > tonumber(ARGV[4]) do
  local forgotten = redis.call('LPOP', ARGV[14])
  redis.call('HDEL', KEYS[7], forgotten, forgotten .. ' r')
  remembered = remembered - 1
end
redis.call('EXPIRE', ARGV[14], ARGV[5])
local request_id = redis.call('HGET', KEYS[3], ARGV[1])
local held = 0
if request_id then
  redis.call('HDEL', KEYS[3], ARGV[1])
  -- The request key shares the session's hash tag, so it lives in this slot.
  local request = ARGV[7] .. request_id
  redis.call('HSET', request, 'state', 'D', 'rpc', ARGV[1], 'resolved', ARGV[2])
  redis.call('EXPIRE', request, ARGV[5])
  held = #ARGV[2]
  if tenant then
    local expires = tonumber(ARGV[13]) + 1000 * tonumber(ARGV[5])
    hold_outcome(ARGV[24], ARGV[25], held, expires, ARGV[1])
  end
end
local remaining = redis.call('HLEN', KEYS[1])
if tenant and remaining == 0 then
  redis.call('SREM', KEYS[8], ARGV[9])
end
if tenant then
  redis.call('ZADD', KEYS[10], 'GT', tonumber(ARGV[13]) + 1000 * tonumber(ARGV[10]), ARGV[9])
  redis.call('PEXPIRE', KEYS[10], 1000 * tonumber(ARGV[10]))
end
for _, key in ipairs({KEYS[4], KEYS[5], KEYS[6]}) do
  redis.call('EXPIRE', key, ARGV[10])
end
if ARGV[17] ~= '' then
  local id = epoch .. ' ' .. seq
  redis.call('ZADD', ARGV[17], ARGV[13], id)
  redis.call('HSET', ARGV[18], id, event, id .. ' a', asked)
  redis.call('EXPIRE', ARGV[17], ARGV[10])
  redis.call('EXPIRE', ARGV[18], ARGV[10])
  -- The index has no expiry: a session leaves it with its outbox's last event.
  redis.call('ZADD', ARGV[19], 'NX', ARGV[13], ARGV[20])
end
local message = epoch .. ' ' .. seq .. ' ' .. event
redis.call(ARGV[11], ARGV[6], message)
if tenant then
  redis.call('PUBLISH', ARGV[8], message)
end
-- On a cluster, the shard's clock for the tenant's part.
local clock = false
if not tenant then
  local now = redis.call('TIME')
  clock = now[1] .. string.format('%06d', now[2])
end
return {'claimed', seq, epoch, remaining, clock, asked, held}
