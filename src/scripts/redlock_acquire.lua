-- Take a Redlock on ONE of its independent masters: SET NX PX, and the node's fencing counter
-- raised to max(counter, hint) + 1, in one atomic step. The client runs this on every node in
-- parallel and counts the node only when it answered {1, token}.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the fencing counter     P{N}:fence   (no TTL, never deleted)
-- KEYS[3]  the release marker      P{N}:rel
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  hint: the highest token this client has seen for the lock (0: none)
-- Reply:   {1, token}  taken on this node; token is the node's new counter
--          {0, pttl}   held by another owner here; pttl is its remaining TTL (-1: no expiry)
--          {-1, type}  the key holds a value of another type
--          {-1, what, key}  the fencing counter at key holds no counter; nothing written
--          {0, 0}      this owner released here already (its tombstone '-owner', or its
--                      release marker 'owner'): the cleanup of a failed try, or the release of
--                      a hold whose renewal had set the key here (redlock_renew.lua, reply 3),
--                      overtook this acquire on another connection of the Client
--                      (connections_per_node >= 2); taking the key now would leave it held by
--                      nobody until its TTL
--@include counter_of.lua
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' then
  if kind ~= 'string' then return {-1, kind} end
  return {0, redis.call('PTTL', KEYS[1])}
end
local marker = redis.pcall('GET', KEYS[3])
if marker == '-' .. ARGV[1] or marker == ARGV[1] then return {0, 0} end
-- A missing counter (a node restarted empty, or failed over to a replica that lacked it) is
-- seeded from this node's clock in microseconds, as a Mutex's is: a majority that restarted
-- empty would otherwise count from 0 again, below the tokens resources have stored. Seeded
-- before the lock is set, so a failure here (an ACL without TIME) leaves no lock. A counter
-- that is no counter (include/counter_of.lua), or one at the last token, 2^53 - 1, which
-- gives no next one, was written by hand: refused before any write. Zero is seeded as missing.
local text = redis.pcall('GET', KEYS[2])
if type(text) == 'table' then return {-1, redis.call('TYPE', KEYS[2])['ok'], KEYS[2]} end
local counter = text and counter_of(text)
if not text or counter == 0 then
  local now = redis.call('TIME')
  text = now[1] .. string.format('%06d', tonumber(now[2]))
  counter = tonumber(text)
  redis.call('SET', KEYS[2], text)
elseif not counter or counter == 9007199254740991 then
  return {-1, 'string (not a counter)', KEYS[2]}
end
-- max(counter, hint) + 1 with Redis's own 64-bit integers: Lua's tostring() of a number this
-- large writes it as '1.7646123451235e+15', which loses its last digits. A hint is a token some
-- node gave, so within the same bound; one that leaves no next token is ignored.
local hint = tonumber(ARGV[3]) or 0
if hint > counter and hint < 9007199254740991 then redis.call('SET', KEYS[2], ARGV[3]) end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, token}
