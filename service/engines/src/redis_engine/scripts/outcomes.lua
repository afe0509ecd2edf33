-- Prepended to the scripts that count a tenant's recorded outcomes: an ask's outcome
-- kept for retries (--request-retention) counts against its tenant's byte budget,
-- beside its pending asks, until it expires. Each is a member `<bytes> <id>` of the
-- tenant's outcomes set, scored by its expiry (ms), and counted in its outcome bytes;
-- a sweep before every budget check takes the expired ones off. Both keys expire with
-- the last outcome they hold, so a tenant that stops asking leaves nothing behind.
local function sweep_outcomes(bytes_key, outcomes_key, now_ms)
  local expired = redis.call('ZRANGEBYSCORE', outcomes_key, '-inf', now_ms, 'LIMIT', 0, 1000)
  if #expired == 0 then
    return
  end
  local freed = 0
  for _, member in ipairs(expired) do
    freed = freed + tonumber(string.match(member, '^(%d+)'))
  end
  redis.call('ZREM', outcomes_key, unpack(expired))
  if redis.call('DECRBY', bytes_key, freed) <= 0 then
    redis.call('DEL', bytes_key)
  end
end

-- Every outcome is kept for the same retention, so the newest expires last: both keys
-- expire with it.
local function hold_outcome(bytes_key, outcomes_key, bytes, expires_ms, id)
  if redis.call('ZADD', outcomes_key, expires_ms, bytes .. ' ' .. id) == 1 then
    redis.call('INCRBY', bytes_key, bytes)
  end
  redis.call('PEXPIREAT', outcomes_key, expires_ms)
  redis.call('PEXPIREAT', bytes_key, expires_ms)
end

-- What the tenant's outcomes hold now.
local function outcome_bytes(bytes_key)
  return tonumber(redis.call('GET', bytes_key) or '0')
end
