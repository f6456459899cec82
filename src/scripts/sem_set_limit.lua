-- Change a Semaphore's limit N at run time. Held permits are never revoked: a lower limit only
-- keeps new acquisitions out until enough permits are released.
-- KEYS[1]  P{N}           must not exist (a lock of another kind has this name)
-- KEYS[2]  P{N}:permits   zset: permit id -> expiry (server ms)
-- KEYS[3]  P{N}:limit     string: the limit
-- ARGV[1]  the new limit (>= 0)
-- ARGV[2]  the semaphore's channel  P{N}:ch
-- Reply:   the number of live permits now held; a WRONGTYPE error for keys of another type
local base = redis.call('TYPE', KEYS[1])['ok']
if base ~= 'none' then return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. base .. ' of another lock kind') end
local pt = redis.call('TYPE', KEYS[2])['ok']
if pt ~= 'none' and pt ~= 'zset' then return redis.error_reply('WRONGTYPE ' .. KEYS[2] .. ' holds a ' .. pt) end
local lt = redis.call('TYPE', KEYS[3])['ok']
if lt ~= 'none' and lt ~= 'string' then return redis.error_reply('WRONGTYPE ' .. KEYS[3] .. ' holds a ' .. lt) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[3], ARGV[1])
redis.pcall('PUBLISH', ARGV[2], 'resized')
return redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')
