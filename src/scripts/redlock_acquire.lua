-- Take a Redlock on ONE of its independent masters: SET NX PX, and the node's fencing counter
-- raised to max(counter, hint) + 1, in one atomic step. The client runs this on every node in
-- parallel and counts the node only when it answered {1, token}.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the fencing counter     P{N}:fence   (no TTL, never deleted)
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  hint: the highest token this client has seen for the lock (0: none)
-- Reply:   {1, token}  taken on this node; token is the node's new counter
--          {0, pttl}   held by another owner here; pttl is its remaining TTL (-1: no expiry)
--          {-1, type}  the key holds a value of another type
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' then
  if kind ~= 'string' then return {-1, kind} end
  return {0, redis.call('PTTL', KEYS[1])}
end
-- A missing counter (a node restarted empty) counts as 0: the hint and the other nodes of the
-- majority carry the order across (see redlock.hpp, "Fencing").
local counter = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
local hint = tonumber(ARGV[3]) or 0
if hint > counter then counter = hint end
counter = counter + 1
redis.call('SET', KEYS[2], tostring(counter))
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, counter}
