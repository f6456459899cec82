-- Change a Semaphore's limit N at run time. Held permits are never revoked: a lower limit only
-- keeps new acquisitions out until enough permits are released.
-- KEYS[1]  P{N}           absent, or a Semaphore's claim (hash kind = 'Semaphore'); anything
--                          else: a lock of another kind has this name
-- KEYS[2]  P{N}:permits   zset: permit id -> expiry (server ms)
-- KEYS[3]  P{N}:limit     string: the limit
-- ARGV[1]  the new limit (>= 0)
-- ARGV[2]  the semaphore's channel  P{N}:ch
-- Reply:   the number of live permits now held; a WRONGTYPE error for keys of another type
local base = redis.call('TYPE', KEYS[1])['ok']
if base ~= 'none' and (base ~= 'hash' or redis.call('HGET', KEYS[1], 'kind') ~= 'Semaphore') then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. base .. ' of another lock kind')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Types are checked only when a command fails on a key of another type (no TYPE per call).
local function wrong_type(key)
  return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. redis.call('TYPE', key)['ok'])
end
local live = redis.pcall('ZCOUNT', KEYS[2], '(' .. now, '+inf')
if type(live) == 'table' then return wrong_type(KEYS[2]) end
-- SET would overwrite a key of any type: refuse one that is not a string.
local lt = redis.call('TYPE', KEYS[3])['ok']
if lt ~= 'none' and lt ~= 'string' then return wrong_type(KEYS[3]) end
redis.call('SET', KEYS[3], ARGV[1])
redis.pcall('PUBLISH', ARGV[2], 'resized')
return live
