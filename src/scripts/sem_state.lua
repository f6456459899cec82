-- Read a Semaphore's limit and the number of live permits. Writes nothing.
-- KEYS[1]  P{N}           must not exist (a lock of another kind has this name)
-- KEYS[2]  P{N}:permits   zset: permit id -> expiry (server ms)
-- KEYS[3]  P{N}:limit     string: the limit
-- Reply:   {limit (-1: none stored yet), live permits}; a WRONGTYPE error for keys of another type
local base = redis.call('TYPE', KEYS[1])['ok']
if base ~= 'none' then return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. base .. ' of another lock kind') end
local pt = redis.call('TYPE', KEYS[2])['ok']
if pt ~= 'none' and pt ~= 'zset' then return redis.error_reply('WRONGTYPE ' .. KEYS[2] .. ' holds a ' .. pt) end
local lt = redis.call('TYPE', KEYS[3])['ok']
if lt ~= 'none' and lt ~= 'string' then return redis.error_reply('WRONGTYPE ' .. KEYS[3] .. ' holds a ' .. lt) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(redis.call('GET', KEYS[3]) or '-1')
return {limit, redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')}
