#!lua flags=allow-oom
-- A FairLock waiter gives up (timed out, cancelled, or unsure whether its last try took the
-- lock): leave the queue, and drop the lock too if it holds it (a try whose reply never came
-- took it, or a release handed it over just as the waiter gave up). A lock dropped here, or
-- found free with a live waiter queued, goes straight to the first live waiter, as in
-- fair_release.lua (the handover is repeated there: scripts cannot share code).
-- KEYS[1]  the lock key            P{N}
-- KEYS[2]  the queue               P{N}:queue
-- KEYS[3]  the waiters' deadlines  P{N}:timeouts
-- KEYS[4]  the fencing counter     P{N}:fence
-- KEYS[5]  the waiters' leases     P{N}:grant     hash: waiter id -> lease TTL ms
-- ARGV[1]  the waiter id (its owner token)
-- ARGV[2]  prefix of the waiters' channels  P{N}:ch:
-- Reply:   {removed, released}  removed: 1 when it was queued; released: 1 when it held the lock

--@include next_token.lua

local me = ARGV[1]
local queued = redis.call('TYPE', KEYS[2])['ok'] == 'list'
local timed = redis.call('TYPE', KEYS[3])['ok'] == 'zset'
local removed = 0
if queued then removed = redis.call('LREM', KEYS[2], 0, me) end
if timed then redis.call('ZREM', KEYS[3], me) end
redis.pcall('HDEL', KEYS[5], me)
local released = 0
if redis.pcall('GET', KEYS[1]) == me then
  redis.call('DEL', KEYS[1])
  released = 1
end
if queued and timed and redis.call('EXISTS', KEYS[1]) == 0 then
  local function channel_of(id) return ARGV[2] .. (string.match(id, '^%x+@(.+):%d+$') or id) end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local head = redis.call('LINDEX', KEYS[2], 0)
  while head do
    local deadline = redis.call('ZSCORE', KEYS[3], head)
    if deadline and tonumber(deadline) > now then break end
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], head)
    redis.pcall('HDEL', KEYS[5], head)
    head = redis.call('LINDEX', KEYS[2], 0)
  end
  local ttl = head and redis.pcall('HGET', KEYS[5], head)
  ttl = type(ttl) == 'string' and #ttl <= 12 and string.match(ttl, '^[1-9]%d*$') and ttl
  local token = ttl and next_token(KEYS[4])
  if token then
    redis.call('SET', KEYS[1], head, 'PX', ttl)
    redis.call('LPOP', KEYS[2])
    redis.call('ZREM', KEYS[3], head)
    redis.call('HDEL', KEYS[5], head)
    redis.pcall('PUBLISH', channel_of(head), 'granted ' .. string.format('%d', token) .. ' ' .. head)
  elseif head then
    redis.pcall('PUBLISH', channel_of(head), 'released ' .. head)
  end
end
return {math.min(removed, 1), released}
