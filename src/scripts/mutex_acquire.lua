-- Take a Mutex: SET NX PX and the next fencing token, in one atomic step. A waiter's try also
-- keeps its Client's place on the waiters' roll, so that a release wakes one Client, not all.
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the fencing counter     P{N}:fence    (no TTL, never deleted)
-- KEYS[3]  the waiters' roll       P{N}:waiters  zset: waiter id -> until when (server ms) its
--          place counts; optional (without it, and with ARGV[3] empty, no place is kept)
-- ARGV[1]  owner token
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  waiter id: the trying Client's id when it waits subscribed to P{N}:ch, or '' (a
--          one-off try, or one made before subscribing: a release could not reach it)
-- ARGV[4]  how long a place counts unless its waiter tries again, in milliseconds
-- ARGV[5]  '1' when more waiters of this Client queue behind this one: acquired, the Client
--          keeps a place (at the end of the roll); otherwise it leaves the roll
-- Reply:   {1, token}  acquired; token is the new fencing token
--          {0, pttl}   held by another owner; pttl is its remaining TTL (-1: no expiry)
--          {-1, type}  the key holds a value of another type
--          {-1, what, key}  the fencing counter at key holds no counter (next_token); no lock set

--@include next_token.lua

local waiter = KEYS[3] and ARGV[3] ~= nil and ARGV[3] ~= '' and ARGV[3]
-- Places are scored by when they stop counting, on the server's clock, so the roll is in order
-- of the waiters' latest tries and a dead waiter's place lapses by itself. pcall: a key of
-- another type at KEYS[3] is not ours and is left alone (no place is kept), and an ACL that
-- refuses TIME or the roll's commands only costs the place (waiters are then woken all at once).
local function take_place()
  local t = redis.pcall('TIME')
  if type(t) ~= 'table' or not t[2] then return end
  local ttl = tonumber(ARGV[4])
  local until_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
  if type(redis.pcall('ZADD', KEYS[3], string.format('%d', until_ms), waiter)) ~= 'number' then return end
  -- The roll lives as long as its longest place: extended, never shortened (GT); a roll just
  -- made has no TTL yet, which GT leaves alone and NX sets (Redis 7.0).
  if redis.call('PEXPIRE', KEYS[3], ttl, 'GT') == 0 then redis.call('PEXPIRE', KEYS[3], ttl, 'NX') end
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' then
  if kind ~= 'string' then return {-1, kind} end
  if waiter then take_place() end
  return {0, redis.call('PTTL', KEYS[1])}
end
-- Counted before the lock is set, so a failure here (e.g. an ACL without TIME) leaves no lock.
local token, bad = next_token(KEYS[2])
if not token then return {-1, bad, KEYS[2]} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if waiter then
  if ARGV[5] == '1' then take_place() else redis.pcall('ZREM', KEYS[3], waiter) end
end
return {1, token}
