-- KEYS: epoch head order asks
return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]),
        redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), redis.call('HGETALL', KEYS[4])}
