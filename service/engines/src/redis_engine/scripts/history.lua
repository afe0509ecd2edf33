-- Prepended to REGISTER, CLAIM and NOTICE: appends `event` to a session's history (a
-- list) and keeps its last `len` events, dropping the oldest while they hold more than
-- `max_bytes` (the newest always stays). `bytes_key` counts the list's bytes and
-- expires with it (`ttl_s`); a resume from before what the list keeps gets `reset`.
local function append_history(events, bytes_key, event, len, max_bytes, ttl_s)
  local count = redis.call('RPUSH', events, event)
  local bytes
  if count == 1 then
    bytes = #event
    redis.call('SET', bytes_key, bytes)
  else
    bytes = redis.call('INCRBY', bytes_key, #event)
  end
  while count > 1 and (count > len or bytes > max_bytes) do
    bytes = redis.call('DECRBY', bytes_key, #redis.call('LPOP', events))
    count = count - 1
  end
  redis.call('EXPIRE', bytes_key, ttl_s)
end
