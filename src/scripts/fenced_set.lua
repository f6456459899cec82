-- The resource-side fencing check: accept a write whose token is >= the highest seen.
-- KEYS[1]  the resource: a hash with fields 'value' and 'fence'
-- ARGV[1]  the value to store
-- ARGV[2]  the writer's fencing token (a positive integer below 2^53)
-- Reply:   {1, highest}  accepted (highest == ARGV[2])
--          {0, highest}  rejected: a newer holder has written already
--          a WRONGTYPE error: the key is no hash, or its 'fence' field is no token
local stored = redis.call('HGET', KEYS[1], 'fence')
-- A 'fence' that is no token (digits only, as written below) was not written here: refused by
-- name rather than compared as whatever Lua makes of it ('1e5', or a script error for 'abc').
if stored and not string.match(stored, '^%d+$') then
  return redis.error_reply('WRONGTYPE field fence of ' .. KEYS[1] .. ' holds no fencing token')
end
local highest = tonumber(stored or '0')
local token = tonumber(ARGV[2])
if token < highest then return {0, highest} end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
return {1, token}
