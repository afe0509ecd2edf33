-- KEYS: epoch head events
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1)}
