-- Read a Semaphore's limit and the number of live permits. Writes nothing.
-- KEYS[1]  P{N}           absent, or a Semaphore's claim (hash kind = 'Semaphore'); anything
--                          else: a lock of another kind has this name
-- KEYS[2]  P{N}:permits   zset: permit id -> expiry (server ms)
-- KEYS[3]  P{N}:limit     string: the limit
-- Reply:   {limit as stored, its decimal digits ('' when none is stored yet), live permits}; a
--          WRONGTYPE error for keys of another type and for a limit that is no count. The limit
--          is not turned into a Lua number: that is exact only below 2^53 (a size_t limit may
--          be up to 2^64 - 1)
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
local stored = redis.pcall('GET', KEYS[3])
if type(stored) == 'table' then return wrong_type(KEYS[3]) end
-- A limit that is no count (sem_acquire.lua refuses it too): named, not read as a number.
if stored and not string.match(stored, '^%d+$') then
  return redis.error_reply('WRONGTYPE ' .. KEYS[3] .. ' holds a string that is not a limit (a count)')
end
local live = redis.pcall('ZCOUNT', KEYS[2], '(' .. now, '+inf')
if type(live) == 'table' then return wrong_type(KEYS[2]) end
return {stored or '', live}
