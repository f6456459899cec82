-- The resource-side fencing check: accept a write whose token is >= the highest seen.
-- KEYS[1]  the resource: a hash with fields 'value' and 'fence'
-- ARGV[1]  the value to store
-- ARGV[2]  the writer's fencing token (a positive integer below 2^53)
-- Reply:   {1, highest}  accepted (highest == ARGV[2])
--          {0, highest}  rejected: a newer holder has written already
local highest = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local token = tonumber(ARGV[2])
if token < highest then return {0, highest} end
redis.call('HSET', KEYS[1], 'value', ARGV[1], 'fence', ARGV[2])
return {1, token}
