-- Read one lock's fencing counter for a MultiLock hold, only while the lock key still holds
-- this owner: the counter moves whenever the lock is taken, so it is the hold's token exactly
-- while the key is ours. (A lease that expired on the server is still "held" in the client
-- until its next renewal; a plain GET then read the next holder's token.)
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the fencing counter     P{N}:fence
-- ARGV[1]  owner token
-- Reply:   the counter (its decimal text), or nil when the key is not this owner's; an error
--          when the key is ours but the counter is gone (deleted by hand, or lost with data
--          the key survived): the hold's token can no longer be read
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return false end
local counter = redis.call('GET', KEYS[2])
if not counter then return redis.error_reply('the fencing counter ' .. KEYS[2] .. ' is missing') end
return counter
