-- KEYS: asks order rids events head epoch request
--       [tenant_sessions tenant_pending tenant_held
--        [node_waits wait_mark session_attended tenant_attended]]
-- ARGV: rpc_id requested request_id history_len max_pending new_epoch channel
--       tenant_channel session_id idle_ttl_s max_tenant_pending publish_command
--       now_ms max_tenant_sessions session_bytes max_session_bytes tenant_bytes
--       max_tenant_bytes
--       [wait_member node_id grace_ms mark_ttl_ms] (or four '') must_be_attended
--       outbox outbox_data outbox_index outbox_member (or four '')
--       history_bytes_key max_history_bytes tenant_outcome_bytes tenant_outcomes
--       fingerprint
-- session_bytes and tenant_bytes name the counters of what pending asks hold (the
-- session's shares its hash tag; the tenant's is used only with the tenant's keys):
-- a new ask's `requested` must fit within both budgets.
-- Without the tenant's keys (on a Redis Cluster, where they live in another slot) the
-- node checks the tenant's caps before (ADMIT_ASK) and does the tenant's part after
-- the script (TENANT_REGISTERED). With the node's keys (one Redis only) the script also
-- puts a new ask on the node's wait list and, for an ask that must be attended, checks
-- that someone follows the session or its tenant (else the node listed it before).
-- With an outbox (a node that queues webhook and channel deliveries) the new event goes
-- into the session's outbox in the same step, and the session into its slot's outbox
-- index: its deliveries are queued even if the node dies right after (OUTBOX_*).
-- ARGV[23] = '1': the ask must be attended. With the node's keys the script checks
-- that someone follows; without them (on a cluster) the node found nobody following.
-- Either way a retry by request_id finds its ask first, pending or ended, whoever
-- follows (Semantics 10 before 8): NO_PROVIDER is for new asks only. On a cluster a
-- retry that finds its ask pending gets its event, for the node to announce it to the
-- tenant again (TENANT_REGISTERED, without counting it).
-- ARGV[32], the ask's fingerprint (its questions and action), is kept with its request
-- id: a request id known with another one is 'reused' (an empty one, kept by an older
-- askgate or by an abort that came first, matches any).
local tenant = KEYS[8] ~= nil
local listing = KEYS[11] ~= nil
local state, fingerprint
if ARGV[3] ~= '' then
  state, fingerprint = unpack(redis.call('HMGET', KEYS[7], 'state', 'fp'))
  if (state == 'P' or state == 'D') and fingerprint and fingerprint ~= ''
      and fingerprint ~= ARGV[32] then
    return {'reused'}
  end
  if state == 'P' then
    local rpc = redis.call('HGET', KEYS[7], 'rpc')
    if tenant then
      return {'joined', rpc}
    end
    -- On a cluster the retry announces the ask to the tenant again (its first
    -- registration may have failed before its tenant part ran): its event with it.
    local now = redis.call('TIME')
    return {'joined', rpc, redis.call('ZSCORE', KEYS[2], rpc), redis.call('GET', KEYS[6]),
      redis.call('HGET', KEYS[1], rpc), now[1] .. string.format('%06d', now[2])}
  elseif state == 'D' then
    return {'recorded', redis.call('HGET', KEYS[7], 'rpc'), redis.call('HGET', KEYS[7], 'resolved')}
  end
end
if ARGV[23] == '1' and (not listing or redis.call('EXISTS', KEYS[13], KEYS[14]) == 0) then
  return {'no_provider'}
end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then
  return {'full'}
end
local size = #ARGV[2]
if tonumber(redis.call('GET', ARGV[15]) or '0') + size > tonumber(ARGV[16]) then
  return {'session_bytes_full'}
end
-- The tenant's byte budget holds its pending asks and its outcomes kept for retries.
if tenant then
  sweep_outcomes(ARGV[30], ARGV[31], ARGV[13])
  local counts = redis.call('MGET', ARGV[17], ARGV[30], KEYS[9])
  if tonumber(counts[1] or '0') + tonumber(counts[2] or '0') + size > tonumber(ARGV[18]) then
    return {'tenant_bytes_full'}
  end
  -- A session held until later is among them; another needs room once the expired
  -- ones are gone.
  local held = redis.call('ZSCORE', KEYS[10], ARGV[9])
  if not held or tonumber(held) <= tonumber(ARGV[13]) then
    redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', ARGV[13])
    if redis.call('ZCARD', KEYS[10]) >= tonumber(ARGV[14]) then
      return {'sessions_full'}
    end
  end
  if tonumber(counts[3] or '0') >= tonumber(ARGV[11]) then
    return {'tenant_full'}
  end
  redis.call('INCR', KEYS[9])
  redis.call('INCRBY', ARGV[17], size)
  -- The session holds state as long as its history: the idle TTL from now.
  redis.call('ZADD', KEYS[10], 'GT', tonumber(ARGV[13]) + 1000 * tonumber(ARGV[10]), ARGV[9])
  redis.call('PEXPIRE', KEYS[10], 1000 * tonumber(ARGV[10]))
end
-- Like the asks it counts, the session's byte count has no expiry; it goes at zero.
redis.call('INCRBY', ARGV[15], size)
if listing then
  redis.call('SADD', KEYS[11], ARGV[19])
  redis.call('HSET', KEYS[12], ARGV[20], ARGV[21])
  redis.call('PEXPIRE', KEYS[12], ARGV[22])
end
local epoch = redis.call('GET', KEYS[6])
if not epoch then
  epoch = ARGV[6]
  redis.call('SET', KEYS[6], epoch)
end
local seq = redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
local event = 'Q' .. ARGV[2]
append_history(KEYS[4], ARGV[28], event, tonumber(ARGV[4]), tonumber(ARGV[29]), ARGV[10])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
  redis.call('HSET', KEYS[7], 'state', 'P', 'rpc', ARGV[1], 'fp', ARGV[32])
  -- A request key that was there (an abort's outcome) expired with it: no longer.
  if state or fingerprint then
    redis.call('PERSIST', KEYS[7])
  end
end
if tenant then
  redis.call('SADD', KEYS[8], ARGV[9])
end
-- A session's history lives as long as it is used, then expires.
for _, key in ipairs({KEYS[4], KEYS[5], KEYS[6]}) do
  redis.call('EXPIRE', key, ARGV[10])
end
if ARGV[24] ~= '' then
  local id = epoch .. ' ' .. seq
  redis.call('ZADD', ARGV[24], ARGV[13], id)
  redis.call('HSET', ARGV[25], id, event)
  redis.call('EXPIRE', ARGV[24], ARGV[10])
  redis.call('EXPIRE', ARGV[25], ARGV[10])
  -- The index has no expiry: a session leaves it with its outbox's last event.
  redis.call('ZADD', ARGV[26], 'NX', ARGV[13], ARGV[27])
end
local message = epoch .. ' ' .. seq .. ' ' .. event
redis.call(ARGV[12], ARGV[7], message)
if tenant then
  redis.call('PUBLISH', ARGV[8], message)
end
-- On a cluster, the shard's clock for the tenant's part.
if tenant then
  return {'new', seq, epoch}
end
local now = redis.call('TIME')
return {'new', seq, epoch, now[1] .. string.format('%06d', now[2])}
