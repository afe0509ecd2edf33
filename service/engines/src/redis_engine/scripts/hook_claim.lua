-- KEYS: due deliveries attempts owners
-- ARGV: now_ms lease_until_ms limit scan per_tenant per_endpoint n_tenants,
--       then n_tenants (tenant, in flight) pairs, then (endpoint, in flight) pairs
-- Hands out due deliveries, oldest first: each is due again when its lease ends (a
-- survivor takes it then if its node died) and its attempts count goes up (an
-- outcome recorded with an older count is dropped). A delivery whose tenant or
-- endpoint has its share of the node's slots in flight is passed over and stays due.
-- Returns json, attempts pairs.
local limit = tonumber(ARGV[3])
local per_tenant = tonumber(ARGV[5])
local per_endpoint = tonumber(ARGV[6])
local tenants, endpoints = {}, {}
local n_tenants = tonumber(ARGV[7])
local i = 8
for _ = 1, n_tenants do
  tenants[ARGV[i]] = tonumber(ARGV[i + 1])
  i = i + 2
end
while i + 1 <= #ARGV do
  endpoints[ARGV[i]] = tonumber(ARGV[i + 1])
  i = i + 2
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))
local out = {}
local claimed = 0
for _, id in ipairs(ids) do
  if claimed >= limit then
    break
  end
  local json = redis.call('HGET', KEYS[2], id)
  if json then
    local owner = redis.call('HGET', KEYS[4], id)
    local room = true
    local tenant, endpoint
    if owner then
      tenant, endpoint = string.match(owner, '^(.-)\t(.*)$')
      room = (tenants[tenant] or 0) < per_tenant and (endpoints[endpoint] or 0) < per_endpoint
    end
    if room then
      if tenant then
        tenants[tenant] = (tenants[tenant] or 0) + 1
        endpoints[endpoint] = (endpoints[endpoint] or 0) + 1
      end
      redis.call('ZADD', KEYS[1], ARGV[2], id)
      table.insert(out, json)
      table.insert(out, redis.call('HINCRBY', KEYS[3], id, 1))
      claimed = claimed + 1
    end
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
