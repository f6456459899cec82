-- Try to take a FairLock, or keep the caller's place in its queue. One atomic step.
-- KEYS[1]  the lock key            P{N}           string: the holder's owner token (as Mutex)
-- KEYS[2]  the fencing counter     P{N}:fence     (no TTL, never deleted)
-- KEYS[3]  the queue               P{N}:queue     list of waiter ids, in arrival order
-- KEYS[4]  the waiters' deadlines  P{N}:timeouts  zset: waiter id -> deadline, server ms
-- KEYS[5]  the waiters' leases     P{N}:grant     hash: waiter id -> lease TTL ms, what a release
--                                                 needs to hand the lock straight to that waiter
-- ARGV[1]  owner token, which is also the waiter id
-- ARGV[2]  lease TTL in milliseconds
-- ARGV[3]  waiter TTL in milliseconds: how long the caller's place outlives this call
-- ARGV[4]  '1': queue the caller when it cannot take the lock now; '0': do not (try_lock)
-- ARGV[5]  prefix of the waiters' channels  P{N}:ch:   (a waiter listens on prefix .. its process
--          part of the id: "<hex>@<process>:<ms>" -> P{N}:ch:<process>; see fair_channel_of)
-- Reply:   {1, token}             acquired; token is the new fencing token. Also when a release
--                                 already handed the lock to the caller (its 'granted' message
--                                 was lost or is still on its way): then token is the one of
--                                 that handover, and the lease's TTL starts again now.
--          {0, hint, position}    not acquired. position: 0 the caller heads the queue, 1 it is
--                                 next after the head, 2 further back, -1 not queued.
--                                 hint: ms until a retry may succeed, -1 unknown: for the head
--                                 the holder's PTTL; for position 1 the holder's PTTL, or while
--                                 the lock is free, the time left to the head's place.
--          {-1, type}             a key holds a value of another type
--          {-1, what, key}        the fencing counter at key holds no counter (next_token)
-- Deadlines are the server's clock (TIME), never a client's.

--@include next_token.lua
--@include counter_of.lua

local lock_type = redis.call('TYPE', KEYS[1])['ok']
if lock_type ~= 'none' and lock_type ~= 'string' then return {-1, lock_type} end
local me = ARGV[1]
if lock_type == 'string' and redis.call('GET', KEYS[1]) == me then
  -- A release handed the lock to us; the counter holds that handover's token (or a later one).
  local fence = redis.pcall('GET', KEYS[2])
  if type(fence) == 'table' then return {-1, redis.call('TYPE', KEYS[2])['ok'], KEYS[2]} end
  local token
  if fence and fence ~= '0' then
    token = counter_of(fence)
    if not token then
      -- Refused before anything is written: the caller gives its place up, and with it the
      -- lock (fair_dequeue.lua), which goes on to the next waiter.
      return {-1, 'string (not a counter)', KEYS[2]}
    end
  else
    -- The counter was lost since the handover: a fresh token, still above every old one.
    local bad
    token, bad = next_token(KEYS[2])
    if not token then return {-1, bad, KEYS[2]} end
  end
  -- The TTL restarts now, after this call was sent: the caller counts its lease from that send
  -- time, so its validity stays conservative.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, token}
end
local queue_type = redis.call('TYPE', KEYS[3])['ok']
if queue_type ~= 'none' and queue_type ~= 'list' then return {-1, queue_type .. ' at ' .. KEYS[3]} end
local timeouts_type = redis.call('TYPE', KEYS[4])['ok']
if timeouts_type ~= 'none' and timeouts_type ~= 'zset' then return {-1, timeouts_type .. ' at ' .. KEYS[4]} end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local waiter_ttl = tonumber(ARGV[3])

-- The channel a waiter listens on (the same rule as fair_channel_of in src/locks/fair_wait.cpp).
local function channel_of(id) return ARGV[5] .. (string.match(id, '^%x+@(.+):%d+$') or id) end

-- Waiters whose place expired (they died, or stopped refreshing) leave the queue; a bounded
-- number per call, so one call stays short whatever piled up.
local old_head = redis.call('LINDEX', KEYS[3], 0)
local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 100)
for _, w in ipairs(expired) do
  redis.call('ZREM', KEYS[4], w)
  redis.call('LREM', KEYS[3], 0, w)
  redis.pcall('HDEL', KEYS[5], w)
end
-- A queued id without a deadline is no live waiter's (its deadline entry was lost).
local head = redis.call('LINDEX', KEYS[3], 0)
while head and not redis.call('ZSCORE', KEYS[4], head) do
  redis.call('LPOP', KEYS[3])
  redis.pcall('HDEL', KEYS[5], head)
  head = redis.call('LINDEX', KEYS[3], 0)
end

local held = lock_type == 'string'
if not held and (not head or head == me) then
  -- Counted before the lock is set, so a failure here leaves no lock.
  local token, bad = next_token(KEYS[2])
  if not token then return {-1, bad, KEYS[2]} end
  redis.call('SET', KEYS[1], me, 'PX', ARGV[2])
  if head == me then
    redis.call('LPOP', KEYS[3])
    redis.call('ZREM', KEYS[4], me)
    redis.pcall('HDEL', KEYS[5], me)
  end
  return {1, token}
end

-- The caller's place: 0 heads the queue, 1 next after the head, 2 further back, nil not queued.
-- Only the first two places need the list. Further back, the deadlines zset says whether the
-- caller is queued (every script adds and removes an id in both together), in O(log N): LPOS
-- would scan the list on every waiter's refresh, O(N^2) per refresh round of N waiters. With
-- the list gone (deleted, evicted) the caller is not counted as queued, and queues again.
local position = nil
if head == me then
  position = 0
elseif head then
  if redis.call('LINDEX', KEYS[3], 1) == me then
    position = 1
  elseif redis.call('ZSCORE', KEYS[4], me) then
    position = 2
  end
end
if ARGV[4] == '1' then
  local grant_type = redis.call('TYPE', KEYS[5])['ok']
  if grant_type ~= 'none' and grant_type ~= 'hash' then return {-1, grant_type .. ' at ' .. KEYS[5]} end
  if not position then
    position = redis.call('RPUSH', KEYS[3], me) - 1
    if position == 0 then head = me end
  end
  redis.call('ZADD', KEYS[4], now + waiter_ttl, me)
  redis.call('HSET', KEYS[5], me, ARGV[2])
  -- The queue's keys live as long as their longest-lived place, so they vanish with the last
  -- waiter even when nobody dequeues it.
  for i = 3, 5 do
    if redis.call('PTTL', KEYS[i]) < waiter_ttl then redis.call('PEXPIRE', KEYS[i], waiter_ttl) end
  end
end

-- The purge made someone else the head while the lock is free: wake that waiter alone (it takes
-- the lock with its own try).
if not held and head and head ~= old_head and head ~= me then
  redis.pcall('PUBLISH', channel_of(head), 'released ' .. head)
end

if not position then return {0, -1, -1} end
if position == 0 then return {0, redis.call('PTTL', KEYS[1]), 0} end
if position == 1 then
  if not held then
    local head_deadline = tonumber(redis.call('ZSCORE', KEYS[4], head))
    return {0, math.max(0, head_deadline - now), 1}
  end
  -- The holder's TTL: should the head leave the queue while the lock is held (it gave up), and
  -- the holder's key then expire without a release, this waiter heads a free lock that nobody
  -- announces. It used to learn that only at its next refresh (waiter_ttl / 3).
  return {0, redis.call('PTTL', KEYS[1]), 1}
end
return {0, -1, 2}
