-- KEYS: asks events head epoch
-- ARGV: rpc_id notice history_len channel publish_command tenant_channel idle_ttl_s
--       mark rank history_bytes_key max_history_bytes
-- Appends a notice (reminder, escalation) about a pending ask to its session's history
-- and publishes it; nothing when the ask is no longer pending. Without the tenant's
-- channel (on a Redis Cluster, where it lives in another slot) the node publishes
-- there after. The mark (in this slot: it shares the session's hash tag) holds the
-- rank of the last notice of its kind: one of that rank or lower was sent already
-- (a timer fired again after its node died), and is not sent twice: 'again', with
-- where the first went.
local asked = redis.call('HGET', KEYS[1], ARGV[1])
if not asked then
  return {'gone'}
end
local last = redis.call('GET', ARGV[8])
if last then
  local rank, sent_seq, sent_epoch = string.match(last, '^(%d+) (%d+) (.*)$')
  if rank and tonumber(rank) >= tonumber(ARGV[9]) then
    return {'again', sent_seq, sent_epoch, asked}
  end
end
local seq = redis.call('INCR', KEYS[3])
local epoch = redis.call('GET', KEYS[4]) or ''
local event = 'N' .. ARGV[2]
append_history(KEYS[2], ARGV[10], event, tonumber(ARGV[3]), tonumber(ARGV[11]), ARGV[7])
for _, key in ipairs({KEYS[2], KEYS[3], KEYS[4]}) do
  redis.call('EXPIRE', key, ARGV[7])
end
redis.call('SET', ARGV[8], ARGV[9] .. ' ' .. seq .. ' ' .. epoch, 'EX', ARGV[7])
local message = epoch .. ' ' .. seq .. ' ' .. event
redis.call(ARGV[5], ARGV[4], message)
if ARGV[6] ~= '' then
  redis.call('PUBLISH', ARGV[6], message)
end
return {'sent', seq, epoch, asked}
